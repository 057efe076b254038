//! Webhook signatures as providers send them: Standard Webhooks, Stripe, GitHub, Shopify and
//! Slack, checked on the raw body bytes as received.
//!
//! Each scheme is an HMAC-SHA256 over a scheme-specific text (the body alone, or the body with a
//! timestamp and an id) carried in the scheme's own header format. A check holds one or more
//! keys, so a sender can rotate its secret: a request passes when any signature entry of its
//! header matches any configured key. Every comparison of signature bytes is constant-time and
//! every combination of key and entry is compared, so response timing says nothing about which
//! key or entry was close. A failure names the check and the header, never a key or the expected
//! signature.

use super::header_value;
use crate::secret::Secret;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fmt;
use subtle::{Choice, ConstantTimeEq};
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// The five provider schemes, named as the `auth.type` of a source names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// <https://www.standardwebhooks.com>: `webhook-id`, `webhook-timestamp`,
    /// `webhook-signature` (`v1,<base64>` entries), keys given as `whsec_<base64>`.
    StandardWebhooks,
    /// `Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>]` over `<t>.<body>`.
    Stripe,
    /// `X-Hub-Signature-256: sha256=<hex>` over the body.
    Github,
    /// `X-Shopify-Hmac-Sha256: <base64>` over the body.
    Shopify,
    /// `X-Slack-Signature: v0=<hex>` over `v0:<X-Slack-Request-Timestamp>:<body>`.
    Slack,
}

/// Standard Webhooks' headers.
pub const WEBHOOK_ID: &str = "webhook-id";
/// Standard Webhooks' timestamp header (Unix seconds).
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// Standard Webhooks' signature header.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// Stripe's signature header.
pub const STRIPE_SIGNATURE: &str = "Stripe-Signature";
/// GitHub's SHA-256 signature header.
pub const GITHUB_SIGNATURE: &str = "X-Hub-Signature-256";
/// GitHub's delivery id.
pub const GITHUB_DELIVERY: &str = "X-GitHub-Delivery";
/// GitHub's event name.
pub const GITHUB_EVENT: &str = "X-GitHub-Event";
/// Shopify's signature header.
pub const SHOPIFY_HMAC: &str = "X-Shopify-Hmac-Sha256";
/// Shopify's webhook id.
pub const SHOPIFY_WEBHOOK_ID: &str = "X-Shopify-Webhook-Id";
/// Shopify's topic (`orders/create`).
pub const SHOPIFY_TOPIC: &str = "X-Shopify-Topic";
/// Slack's signature header.
pub const SLACK_SIGNATURE: &str = "X-Slack-Signature";
/// Slack's timestamp header (Unix seconds).
pub const SLACK_TIMESTAMP: &str = "X-Slack-Request-Timestamp";
/// The prefix of a Standard Webhooks secret.
pub const WHSEC_PREFIX: &str = "whsec_";
/// The default timestamp tolerance of the schemes that sign a timestamp: five minutes.
pub const DEFAULT_TOLERANCE_SECONDS: u64 = 300;

impl Scheme {
    /// Every scheme with the name `auth.type` gives it.
    pub const ALL: [(Scheme, &'static str); 5] = [
        (Scheme::StandardWebhooks, "standardWebhooks"),
        (Scheme::Stripe, "stripe"),
        (Scheme::Github, "github"),
        (Scheme::Shopify, "shopify"),
        (Scheme::Slack, "slack"),
    ];

    /// The `auth.type` name.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standardWebhooks",
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
            Scheme::Shopify => "shopify",
            Scheme::Slack => "slack",
        }
    }

    /// The scheme `auth.type` names, in any letter case.
    pub fn from_name(name: &str) -> Option<Scheme> {
        Self::ALL
            .iter()
            .find(|(_, candidate)| candidate.eq_ignore_ascii_case(name.trim()))
            .map(|(scheme, _)| *scheme)
    }

    /// The header that carries the signature; an inbox row does not keep it.
    pub fn signature_header(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => WEBHOOK_SIGNATURE,
            Scheme::Stripe => STRIPE_SIGNATURE,
            Scheme::Github => GITHUB_SIGNATURE,
            Scheme::Shopify => SHOPIFY_HMAC,
            Scheme::Slack => SLACK_SIGNATURE,
        }
    }

    /// Whether the scheme signs a timestamp (so `timestampTolerance` applies).
    pub fn has_timestamp(self) -> bool {
        matches!(
            self,
            Scheme::StandardWebhooks | Scheme::Stripe | Scheme::Slack
        )
    }

    /// The header the idempotency key comes from when the source sets no `idempotencyKeyPath`.
    pub fn default_key_header(self) -> Option<&'static str> {
        match self {
            Scheme::StandardWebhooks => Some(WEBHOOK_ID),
            Scheme::Github => Some(GITHUB_DELIVERY),
            Scheme::Shopify => Some(SHOPIFY_WEBHOOK_ID),
            Scheme::Stripe | Scheme::Slack => None,
        }
    }

    /// The body path of the idempotency key when the source sets no `idempotencyKeyPath`.
    pub fn default_key_path(self) -> Option<&'static str> {
        match self {
            Scheme::Stripe => Some("$.id"),
            _ => None,
        }
    }

    /// The header the event type comes from when the source sets no `eventTypePath`.
    pub fn default_event_type_header(self) -> Option<&'static str> {
        match self {
            Scheme::Github => Some(GITHUB_EVENT),
            Scheme::Shopify => Some(SHOPIFY_TOPIC),
            _ => None,
        }
    }
}

/// One HMAC key. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
struct Key(Vec<u8>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(***)")
    }
}

/// Why a configured secret cannot be a key of its scheme.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum BadSecret {
    /// No secret at all.
    #[error("needs at least one secret")]
    None,
    /// An empty secret would let anyone sign.
    #[error("secret {index} is empty")]
    Empty {
        /// Its place in the list, from 0.
        index: usize,
    },
    /// A Standard Webhooks secret that is not base64 after `whsec_`.
    #[error("secret {index} is not `whsec_` followed by base64")]
    NotBase64 {
        /// Its place in the list, from 0.
        index: usize,
    },
}

/// The HMAC key a configured secret stands for: a Standard Webhooks secret is the base64 after
/// `whsec_` (the prefix is optional, as the official libraries allow); every other scheme uses the
/// secret's bytes as they are.
///
/// # Errors
/// [`BadSecret`] for an empty secret or a Standard Webhooks secret that is not base64.
fn key_of(scheme: Scheme, secret: &Secret, index: usize) -> Result<Key, BadSecret> {
    let text = secret.expose();
    if text.is_empty() {
        return Err(BadSecret::Empty { index });
    }
    match scheme {
        Scheme::StandardWebhooks => {
            let encoded = text.strip_prefix(WHSEC_PREFIX).unwrap_or(text);
            match STANDARD.decode(encoded.trim()) {
                Ok(bytes) if !bytes.is_empty() => Ok(Key(bytes)),
                _ => Err(BadSecret::NotBase64 { index }),
            }
        }
        _ => Ok(Key(text.as_bytes().to_vec())),
    }
}

/// Checks that every secret of `secrets` is a valid key of `scheme`.
///
/// # Errors
/// The first [`BadSecret`].
pub fn check_secrets(scheme: Scheme, secrets: &[Secret]) -> Result<(), BadSecret> {
    SignatureCheck::new(scheme, secrets, DEFAULT_TOLERANCE_SECONDS).map(|_| ())
}

/// A provider signature check of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureCheck {
    scheme: Scheme,
    keys: Vec<Key>,
    tolerance_seconds: u64,
    /// The header the idempotency key is read from (the scheme's default when the source sets
    /// no `idempotencyKeyPath`); `None`: the body path decides.
    pub key_header: Option<String>,
    /// The header the event type is read from (the scheme's default when the source sets no
    /// `eventTypePath`).
    pub event_type_header: Option<String>,
}

/// Why a request failed a provider signature check: the body of the 401 answer. The text names
/// the check and the header, never a key or a computed signature.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum SignatureFailure {
    /// A header the scheme needs is absent.
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header that is present but not in the scheme's format.
    #[error("malformed header {header}: {why}")]
    Malformed {
        /// The header name.
        header: &'static str,
        /// What is wrong with its form.
        why: &'static str,
    },
    /// The signed timestamp is too far from the clock: an old (possibly replayed) or a future
    /// request.
    #[error(
        "timestamp outside tolerance: header {header} is more than {tolerance_seconds} s from now"
    )]
    Stale {
        /// The header that carries the timestamp.
        header: &'static str,
        /// The configured tolerance.
        tolerance_seconds: u64,
    },
    /// No signature of the header matches the body under any configured secret.
    #[error(
        "signature mismatch: no signature in header {0} matches the body under a configured secret"
    )]
    Mismatch(&'static str),
}

impl SignatureCheck {
    /// A check of `scheme` with `secrets` (at least one; several during a rotation) and a
    /// timestamp tolerance in seconds (ignored by the schemes that sign no timestamp).
    ///
    /// # Errors
    /// [`BadSecret`] when the list is empty or a secret is not a key of the scheme.
    pub fn new(
        scheme: Scheme,
        secrets: &[Secret],
        tolerance_seconds: u64,
    ) -> Result<Self, BadSecret> {
        if secrets.is_empty() {
            return Err(BadSecret::None);
        }
        let keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| key_of(scheme, secret, index))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            scheme,
            keys,
            tolerance_seconds,
            key_header: None,
            event_type_header: None,
        })
    }

    /// A check with no key: it refuses every request. What a source gets when its secrets
    /// cannot be keys (the configuration loader refuses them first, so this is a last guard that
    /// fails closed).
    pub fn refusing(scheme: Scheme) -> Self {
        Self {
            scheme,
            keys: Vec::new(),
            tolerance_seconds: 0,
            key_header: None,
            event_type_header: None,
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The header this check reads its signature from.
    pub fn signature_header(&self) -> &'static str {
        self.scheme.signature_header()
    }

    /// Checks one request: `body` is the raw body as received, `now_unix_ms` the clock.
    ///
    /// # Errors
    /// The [`SignatureFailure`] of the first check that failed: headers present, timestamp
    /// form and age, then the signature.
    pub fn verify(
        &self,
        headers: &[(String, String)],
        body: &[u8],
        now_unix_ms: i64,
    ) -> Result<(), SignatureFailure> {
        let need = |name: &'static str| {
            header_value(headers, name).ok_or(SignatureFailure::MissingHeader(name))
        };
        match self.scheme {
            Scheme::StandardWebhooks => {
                let id = need(WEBHOOK_ID)?;
                let timestamp = need(WEBHOOK_TIMESTAMP)?;
                let signatures = need(WEBHOOK_SIGNATURE)?;
                self.fresh(WEBHOOK_TIMESTAMP, timestamp, now_unix_ms)?;
                let entries: Vec<Vec<u8>> = signatures
                    .split_whitespace()
                    .filter_map(|entry| entry.strip_prefix("v1,"))
                    .filter_map(|encoded| STANDARD.decode(encoded).ok())
                    .collect();
                self.matches(WEBHOOK_SIGNATURE, &entries, |mac| {
                    mac.update(id.as_bytes());
                    mac.update(b".");
                    mac.update(timestamp.as_bytes());
                    mac.update(b".");
                    mac.update(body);
                })
            }
            Scheme::Stripe => {
                let header = need(STRIPE_SIGNATURE)?;
                let mut timestamp = None;
                let mut entries = Vec::new();
                for item in header.split(',') {
                    match item.trim().split_once('=') {
                        Some(("t", value)) if timestamp.is_none() => timestamp = Some(value),
                        Some(("v1", value)) => {
                            if let Ok(bytes) = hex::decode(value) {
                                entries.push(bytes);
                            }
                        }
                        _ => {}
                    }
                }
                let timestamp = timestamp.ok_or(SignatureFailure::Malformed {
                    header: STRIPE_SIGNATURE,
                    why: "no t= timestamp",
                })?;
                self.fresh(STRIPE_SIGNATURE, timestamp, now_unix_ms)?;
                self.matches(STRIPE_SIGNATURE, &entries, |mac| {
                    mac.update(timestamp.as_bytes());
                    mac.update(b".");
                    mac.update(body);
                })
            }
            Scheme::Github => {
                let entries = prefixed_hex(
                    need(GITHUB_SIGNATURE)?,
                    GITHUB_SIGNATURE,
                    "sha256=",
                    "does not start with sha256=",
                )?;
                self.matches(GITHUB_SIGNATURE, &entries, |mac| mac.update(body))
            }
            Scheme::Shopify => {
                let header = need(SHOPIFY_HMAC)?;
                let entries: Vec<Vec<u8>> =
                    STANDARD.decode(header.trim()).ok().into_iter().collect();
                self.matches(SHOPIFY_HMAC, &entries, |mac| mac.update(body))
            }
            Scheme::Slack => {
                let timestamp = need(SLACK_TIMESTAMP)?;
                let header = need(SLACK_SIGNATURE)?;
                self.fresh(SLACK_TIMESTAMP, timestamp, now_unix_ms)?;
                let entries =
                    prefixed_hex(header, SLACK_SIGNATURE, "v0=", "does not start with v0=")?;
                self.matches(SLACK_SIGNATURE, &entries, |mac| {
                    mac.update(b"v0:");
                    mac.update(timestamp.as_bytes());
                    mac.update(b":");
                    mac.update(body);
                })
            }
        }
    }

    /// Checks the form and age of a timestamp in Unix seconds.
    fn fresh(
        &self,
        header: &'static str,
        text: &str,
        now_unix_ms: i64,
    ) -> Result<(), SignatureFailure> {
        let sent: i64 = text
            .trim()
            .parse()
            .map_err(|_| SignatureFailure::Malformed {
                header,
                why: "not a Unix time in seconds",
            })?;
        let now = i128::from(now_unix_ms).div_euclid(1000);
        let distance = (now - i128::from(sent)).unsigned_abs();
        if distance > u128::from(self.tolerance_seconds) {
            return Err(SignatureFailure::Stale {
                header,
                tolerance_seconds: self.tolerance_seconds,
            });
        }
        Ok(())
    }

    /// Whether any of `entries` equals the HMAC of the signed text (fed by `feed`) under any key.
    /// Every pair is compared in constant time, without stopping at the first match.
    fn matches(
        &self,
        header: &'static str,
        entries: &[Vec<u8>],
        feed: impl Fn(&mut HmacSha256),
    ) -> Result<(), SignatureFailure> {
        let mut found = Choice::from(0);
        for key in &self.keys {
            // HMAC takes a key of any length, so building it cannot fail.
            let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(&key.0) else {
                continue;
            };
            feed(&mut mac);
            let expected = mac.finalize().into_bytes();
            for entry in entries {
                found |= expected.as_slice().ct_eq(entry.as_slice());
            }
        }
        if bool::from(found) {
            Ok(())
        } else {
            Err(SignatureFailure::Mismatch(header))
        }
    }
}

/// The one signature of a `<prefix><hex>` header (GitHub, Slack); a value that is not hex is a
/// signature that matches nothing.
fn prefixed_hex(
    value: &str,
    header: &'static str,
    prefix: &str,
    why: &'static str,
) -> Result<Vec<Vec<u8>>, SignatureFailure> {
    let hex_text = value
        .trim()
        .strip_prefix(prefix)
        .ok_or(SignatureFailure::Malformed { header, why })?;
    Ok(hex::decode(hex_text).ok().into_iter().collect())
}

/// Outbound Standard Webhooks signing: the `webhook-signature` value of one request, one
/// `v1,<base64>` entry per key, space-separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandardWebhooksSigner {
    keys: Vec<Key>,
}

impl StandardWebhooksSigner {
    /// A signer with `secrets` (`whsec_<base64>`; several during a rotation).
    ///
    /// # Errors
    /// [`BadSecret`] when the list is empty or a secret is not base64.
    pub fn new(secrets: &[Secret]) -> Result<Self, BadSecret> {
        SignatureCheck::new(Scheme::StandardWebhooks, secrets, DEFAULT_TOLERANCE_SECONDS)
            .map(|check| Self { keys: check.keys })
    }

    /// The `webhook-signature` value for message `id` sent at `timestamp` (Unix seconds, as
    /// sent in `webhook-timestamp`) with `body`.
    pub fn signature(&self, id: &str, timestamp: &str, body: &[u8]) -> String {
        let mut out = String::new();
        for key in &self.keys {
            let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(&key.0) else {
                continue;
            };
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.as_bytes());
            mac.update(b".");
            mac.update(body);
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str("v1,");
            out.push_str(&STANDARD.encode(mac.finalize().into_bytes()));
        }
        out
    }
}

#[cfg(test)]
mod tests;
