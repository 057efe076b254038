//! The credential checks of an HTTP source: a bearer token, an API key, or an HMAC signature of
//! the raw body with an optional timestamp against replays.
//!
//! Every comparison of a credential runs in constant time over SHA-256 digests of both sides, so
//! neither the content nor the length of the configured value leaks through response timing. A
//! failure names the check that failed and the header it read, never a value.

use super::header_value;
use super::signatures::{SignatureCheck, SignatureFailure};
use crate::secret::Secret;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;
use thiserror::Error;

/// The header of the bearer check.
pub const AUTHORIZATION: &str = "Authorization";
/// The default header of the API-key check.
pub const DEFAULT_API_KEY_HEADER: &str = "X-API-Key";

/// The digest of an HMAC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HmacAlgorithm {
    /// `HmacSHA256`.
    Sha256,
    /// `HmacSHA512`.
    Sha512,
}

/// The replay guard of an HMAC check: a header with the send time in Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampRule {
    /// The header that carries the send time.
    pub header: String,
    /// The largest difference, in milliseconds, between the send time and the clock.
    pub tolerance_ms: u64,
    /// True when the signature covers `<timestamp>.<body>` (so a captured signature cannot be
    /// reused with a fresh timestamp); false when it covers the body alone.
    pub signed: bool,
}

/// An HMAC check of the raw body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacCheck {
    /// The shared key.
    pub secret: Secret,
    /// The header that carries the signature.
    pub header: String,
    /// SHA-256 or SHA-512.
    pub algorithm: HmacAlgorithm,
    /// The text before the lower-case hexadecimal signature.
    pub signature_prefix: String,
    /// The optional replay guard.
    pub timestamp: Option<TimestampRule>,
}

/// The credentials every request of a source must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialCheck {
    /// `Authorization: Bearer <token>`, the scheme in any letter case.
    Bearer {
        /// The expected token.
        token: Secret,
    },
    /// The key in a configurable header.
    ApiKey {
        /// The header that carries the key.
        header: String,
        /// The expected key.
        key: Secret,
    },
    /// An HMAC signature of the body.
    Hmac(HmacCheck),
    /// A provider's webhook signature (Standard Webhooks, Stripe, GitHub, Shopify, Slack).
    Signature(SignatureCheck),
}

/// Why a request failed its source's credential check. The text names the check and the header,
/// never a credential, and is the body of the 401 answer.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization` header.
    #[error("Missing Authorization header")]
    MissingAuthorization,
    /// An `Authorization` header without the `Bearer` scheme.
    #[error("Authorization header does not carry a Bearer token")]
    NotBearer,
    /// A bearer token other than the configured one.
    #[error("Invalid bearer token")]
    WrongBearer,
    /// No API-key header.
    #[error("Missing API key header {header}")]
    MissingApiKey {
        /// The header name.
        header: String,
    },
    /// An API key other than the configured one.
    #[error("Invalid API key in header {header}")]
    WrongApiKey {
        /// The header name.
        header: String,
    },
    /// No signature header.
    #[error("Missing signature header {header}")]
    MissingSignature {
        /// The header name.
        header: String,
    },
    /// A signature other than the one computed from the body.
    #[error("Invalid signature in header {header}")]
    WrongSignature {
        /// The header name.
        header: String,
    },
    /// No timestamp header although the check needs one.
    #[error("Missing timestamp header {header}")]
    MissingTimestamp {
        /// The header name.
        header: String,
    },
    /// A timestamp that is not a whole number of milliseconds.
    #[error("Timestamp header {header} is not a Unix time in milliseconds")]
    BadTimestamp {
        /// The header name.
        header: String,
    },
    /// A timestamp too far from the clock: an old (possibly replayed) or future request.
    #[error("Timestamp header {header} is outside the tolerance of {tolerance_ms} ms")]
    StaleTimestamp {
        /// The header name.
        header: String,
        /// The configured tolerance.
        tolerance_ms: u64,
    },
    /// A provider signature check failed; the text names the check and the header.
    #[error(transparent)]
    Signature(#[from] SignatureFailure),
}

impl CredentialCheck {
    /// The header this check reads its credential from; an inbox row never stores it.
    pub fn credential_header(&self) -> &str {
        match self {
            CredentialCheck::Bearer { .. } => AUTHORIZATION,
            CredentialCheck::ApiKey { header, .. } => header,
            CredentialCheck::Hmac(check) => &check.header,
            CredentialCheck::Signature(check) => check.signature_header(),
        }
    }

    /// Checks the credentials of one request.
    ///
    /// `now_unix_ms` is the clock reading the timestamp guard compares with.
    ///
    /// # Errors
    /// The [`AuthFailure`] of the first check that failed.
    pub fn verify(
        &self,
        headers: &[(String, String)],
        body: &[u8],
        now_unix_ms: i64,
    ) -> Result<(), AuthFailure> {
        match self {
            CredentialCheck::Bearer { token } => verify_bearer(token, headers),
            CredentialCheck::ApiKey { header, key } => {
                let received =
                    header_value(headers, header).ok_or_else(|| AuthFailure::MissingApiKey {
                        header: header.clone(),
                    })?;
                if same_secret(received.as_bytes(), key.expose().as_bytes()) {
                    Ok(())
                } else {
                    Err(AuthFailure::WrongApiKey {
                        header: header.clone(),
                    })
                }
            }
            CredentialCheck::Hmac(check) => check.verify(headers, body, now_unix_ms),
            CredentialCheck::Signature(check) => Ok(check.verify(headers, body, now_unix_ms)?),
        }
    }
}

fn verify_bearer(token: &Secret, headers: &[(String, String)]) -> Result<(), AuthFailure> {
    let value = header_value(headers, AUTHORIZATION).ok_or(AuthFailure::MissingAuthorization)?;
    let value = value.trim();
    let (scheme, received) = value
        .split_once(char::is_whitespace)
        .ok_or(AuthFailure::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthFailure::NotBearer);
    }
    if same_secret(received.trim_start().as_bytes(), token.expose().as_bytes()) {
        Ok(())
    } else {
        Err(AuthFailure::WrongBearer)
    }
}

impl HmacCheck {
    fn verify(
        &self,
        headers: &[(String, String)],
        body: &[u8],
        now_unix_ms: i64,
    ) -> Result<(), AuthFailure> {
        let received =
            header_value(headers, &self.header).ok_or_else(|| AuthFailure::MissingSignature {
                header: self.header.clone(),
            })?;
        let mut signed_timestamp = None;
        if let Some(rule) = &self.timestamp {
            let text = rule.check(headers, now_unix_ms)?;
            if rule.signed {
                signed_timestamp = Some(text);
            }
        }
        let expected = format!(
            "{}{}",
            self.signature_prefix,
            self.signature(signed_timestamp, body)
        );
        if same_secret(received.as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(AuthFailure::WrongSignature {
                header: self.header.clone(),
            })
        }
    }

    /// The lower-case hexadecimal HMAC of `<timestamp>.<body>`, or of the body alone.
    pub fn signature(&self, timestamp: Option<&str>, body: &[u8]) -> String {
        fn mac<M: Mac + KeyInit>(key: &[u8], timestamp: Option<&str>, body: &[u8]) -> String {
            // HMAC takes a key of any length, so building it cannot fail.
            let Ok(mut mac) = <M as KeyInit>::new_from_slice(key) else {
                return String::new();
            };
            if let Some(timestamp) = timestamp {
                mac.update(timestamp.as_bytes());
                mac.update(b".");
            }
            mac.update(body);
            hex::encode(mac.finalize().into_bytes())
        }
        let key = self.secret.expose().as_bytes();
        match self.algorithm {
            HmacAlgorithm::Sha256 => mac::<Hmac<Sha256>>(key, timestamp, body),
            HmacAlgorithm::Sha512 => mac::<Hmac<Sha512>>(key, timestamp, body),
        }
    }
}

impl TimestampRule {
    /// Checks presence, format and age; returns the header text as received (what a signed
    /// payload covers).
    fn check<'a>(
        &self,
        headers: &'a [(String, String)],
        now_unix_ms: i64,
    ) -> Result<&'a str, AuthFailure> {
        let text =
            header_value(headers, &self.header).ok_or_else(|| AuthFailure::MissingTimestamp {
                header: self.header.clone(),
            })?;
        let sent: i64 = text.trim().parse().map_err(|_| AuthFailure::BadTimestamp {
            header: self.header.clone(),
        })?;
        let distance = (i128::from(now_unix_ms) - i128::from(sent)).unsigned_abs();
        if distance > u128::from(self.tolerance_ms) {
            return Err(AuthFailure::StaleTimestamp {
                header: self.header.clone(),
                tolerance_ms: self.tolerance_ms,
            });
        }
        Ok(text)
    }
}

/// Constant-time equality of a received and a configured credential. Comparing digests rather
/// than the texts keeps the time independent of where they differ and of their lengths.
fn same_secret(received: &[u8], expected: &[u8]) -> bool {
    let received = Sha256::digest(received);
    let expected = Sha256::digest(expected);
    received.as_slice().ct_eq(expected.as_slice()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_760_000_000_000;
    const BODY: &[u8] = br#"{"id":"evt_1"}"#;

    fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn bearer() -> CredentialCheck {
        CredentialCheck::Bearer {
            token: Secret::new("s3cret-token"),
        }
    }

    fn hmac(algorithm: HmacAlgorithm, timestamp: Option<TimestampRule>) -> HmacCheck {
        HmacCheck {
            secret: Secret::new("whsec"),
            header: "X-Signature".into(),
            algorithm,
            signature_prefix: "sha256=".into(),
            timestamp,
        }
    }

    fn guard(signed: bool) -> Option<TimestampRule> {
        Some(TimestampRule {
            header: "X-Timestamp".into(),
            tolerance_ms: 300_000,
            signed,
        })
    }

    #[test]
    fn bearer_accepts_the_token_with_the_scheme_in_any_case() {
        for value in [
            "Bearer s3cret-token",
            "bearer s3cret-token",
            "BEARER  s3cret-token",
        ] {
            let h = headers(&[("authorization", value)]);
            assert_eq!(bearer().verify(&h, BODY, NOW), Ok(()), "{value}");
        }
    }

    #[test]
    fn bearer_refuses_absent_schemeless_other_scheme_and_wrong_token() {
        let check = bearer();
        assert_eq!(
            check.verify(&headers(&[]), BODY, NOW),
            Err(AuthFailure::MissingAuthorization)
        );
        for value in ["s3cret-token", "Basic s3cret-token", "Token s3cret-token"] {
            assert_eq!(
                check.verify(&headers(&[("Authorization", value)]), BODY, NOW),
                Err(AuthFailure::NotBearer),
                "{value}"
            );
        }
        for value in [
            "Bearer wrong",
            "Bearer s3cret-token2",
            "Bearer S3CRET-TOKEN",
        ] {
            assert_eq!(
                check.verify(&headers(&[("Authorization", value)]), BODY, NOW),
                Err(AuthFailure::WrongBearer),
                "{value}"
            );
        }
    }

    #[test]
    fn api_key_reads_its_configured_header_in_any_case() {
        let check = CredentialCheck::ApiKey {
            header: "X-Partner-Key".into(),
            key: Secret::new("k-123"),
        };
        assert_eq!(
            check.verify(&headers(&[("x-partner-key", "k-123")]), BODY, NOW),
            Ok(())
        );
        assert_eq!(
            check.verify(&headers(&[("x-partner-key", "k-124")]), BODY, NOW),
            Err(AuthFailure::WrongApiKey {
                header: "X-Partner-Key".into()
            })
        );
        assert_eq!(
            check.verify(&headers(&[("x-api-key", "k-123")]), BODY, NOW),
            Err(AuthFailure::MissingApiKey {
                header: "X-Partner-Key".into()
            })
        );
        assert_eq!(check.credential_header(), "X-Partner-Key");
    }

    #[test]
    fn hmac_sha256_matches_a_known_vector() {
        // printf '%s' '{"id":"evt_1"}' | openssl dgst -sha256 -hmac whsec
        let check = hmac(HmacAlgorithm::Sha256, None);
        let expected = check.signature(None, BODY);
        assert_eq!(
            expected,
            "972fa72950a8df1efdfe2fbeba379b39172fd32f839d2dad21a40aa7584124ab"
        );
        let good = headers(&[("x-signature", &format!("sha256={expected}"))]);
        assert_eq!(
            CredentialCheck::Hmac(check).verify(&good, BODY, NOW),
            Ok(())
        );
    }

    #[test]
    fn hmac_sha256_rfc4231_vector() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let check = HmacCheck {
            secret: Secret::new("Jefe"),
            ..hmac(HmacAlgorithm::Sha256, None)
        };
        assert_eq!(
            check.signature(None, b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let check512 = HmacCheck {
            algorithm: HmacAlgorithm::Sha512,
            ..check
        };
        assert_eq!(
            check512.signature(None, b"what do ya want for nothing?"),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
    }

    #[test]
    fn hmac_refuses_a_wrong_or_absent_signature() {
        let check = CredentialCheck::Hmac(hmac(HmacAlgorithm::Sha512, None));
        let CredentialCheck::Hmac(inner) = &check else {
            unreachable!()
        };
        let right = format!("sha256={}", inner.signature(None, BODY));
        assert_eq!(right.len(), 7 + 128);
        assert_eq!(
            check.verify(&headers(&[("X-Signature", &right)]), BODY, NOW),
            Ok(())
        );
        // Another body, the upper-case form, or no prefix all fail.
        let other = br#"{"id":"evt_2"}"#;
        let wrong = WrongSig("X-Signature");
        assert_eq!(
            check.verify(&headers(&[("X-Signature", &right)]), other, NOW),
            wrong.err()
        );
        assert_eq!(
            check.verify(
                &headers(&[("X-Signature", &right.to_uppercase())]),
                BODY,
                NOW
            ),
            wrong.err()
        );
        assert_eq!(
            check.verify(
                &headers(&[("X-Signature", &right["sha256=".len()..])]),
                BODY,
                NOW
            ),
            wrong.err()
        );
        assert_eq!(
            check.verify(&headers(&[]), BODY, NOW),
            Err(AuthFailure::MissingSignature {
                header: "X-Signature".into()
            })
        );
    }

    struct WrongSig(&'static str);
    impl WrongSig {
        fn err(&self) -> Result<(), AuthFailure> {
            Err(AuthFailure::WrongSignature {
                header: self.0.into(),
            })
        }
    }

    #[test]
    fn an_empty_prefix_signs_with_the_bare_hex() {
        let check = HmacCheck {
            signature_prefix: String::new(),
            ..hmac(HmacAlgorithm::Sha256, None)
        };
        let bare = check.signature(None, BODY);
        assert_eq!(
            CredentialCheck::Hmac(check).verify(&headers(&[("X-Signature", &bare)]), BODY, NOW),
            Ok(())
        );
    }

    #[test]
    fn timestamp_dot_body_accepts_a_fresh_signed_request() {
        let inner = hmac(HmacAlgorithm::Sha256, guard(true));
        let ts = (NOW - 1_000).to_string();
        let sig = format!("sha256={}", inner.signature(Some(&ts), BODY));
        let check = CredentialCheck::Hmac(inner);
        let h = headers(&[("X-Timestamp", &ts), ("X-Signature", &sig)]);
        assert_eq!(check.verify(&h, BODY, NOW), Ok(()));
        // A timestamp slightly in the future is within the tolerance too.
        let ahead = (NOW + 200_000).to_string();
        let CredentialCheck::Hmac(inner) = &check else {
            unreachable!()
        };
        let sig = format!("sha256={}", inner.signature(Some(&ahead), BODY));
        let h = headers(&[("X-Timestamp", &ahead), ("X-Signature", &sig)]);
        assert_eq!(check.verify(&h, BODY, NOW), Ok(()));
    }

    #[test]
    fn a_stale_timestamp_fails_even_with_a_right_signature() {
        let inner = hmac(HmacAlgorithm::Sha256, guard(true));
        let old = (NOW - 300_001).to_string();
        let sig = format!("sha256={}", inner.signature(Some(&old), BODY));
        let check = CredentialCheck::Hmac(inner);
        let h = headers(&[("X-Timestamp", &old), ("X-Signature", &sig)]);
        assert_eq!(
            check.verify(&h, BODY, NOW),
            Err(AuthFailure::StaleTimestamp {
                header: "X-Timestamp".into(),
                tolerance_ms: 300_000
            })
        );
    }

    #[test]
    fn a_replayed_signature_with_a_new_timestamp_fails_when_the_timestamp_is_signed() {
        let inner = hmac(HmacAlgorithm::Sha256, guard(true));
        let old = (NOW - 3_600_000).to_string();
        let captured = format!("sha256={}", inner.signature(Some(&old), BODY));
        let check = CredentialCheck::Hmac(inner);
        let fresh = NOW.to_string();
        let replay = headers(&[("X-Timestamp", &fresh), ("X-Signature", &captured)]);
        assert_eq!(
            check.verify(&replay, BODY, NOW),
            WrongSig("X-Signature").err()
        );
    }

    #[test]
    fn with_a_body_only_signature_a_new_timestamp_passes_but_its_age_is_checked() {
        let inner = hmac(HmacAlgorithm::Sha256, guard(false));
        let sig = format!("sha256={}", inner.signature(None, BODY));
        let check = CredentialCheck::Hmac(inner);
        let fresh = headers(&[("X-Timestamp", &NOW.to_string()), ("X-Signature", &sig)]);
        assert_eq!(check.verify(&fresh, BODY, NOW), Ok(()));
        let old = headers(&[
            ("X-Timestamp", &(NOW - 400_000).to_string()),
            ("X-Signature", &sig),
        ]);
        assert!(matches!(
            check.verify(&old, BODY, NOW),
            Err(AuthFailure::StaleTimestamp { .. })
        ));
    }

    #[test]
    fn a_missing_or_malformed_timestamp_fails() {
        let check = CredentialCheck::Hmac(hmac(HmacAlgorithm::Sha256, guard(true)));
        assert_eq!(
            check.verify(&headers(&[("X-Signature", "sha256=00")]), BODY, NOW),
            Err(AuthFailure::MissingTimestamp {
                header: "X-Timestamp".into()
            })
        );
        for bad in ["soon", "1.5", "", "99999999999999999999999"] {
            assert_eq!(
                check.verify(
                    &headers(&[("X-Signature", "sha256=00"), ("X-Timestamp", bad)]),
                    BODY,
                    NOW
                ),
                Err(AuthFailure::BadTimestamp {
                    header: "X-Timestamp".into()
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn failure_texts_never_hold_a_credential() {
        let failures = [
            bearer().verify(&headers(&[("Authorization", "Bearer nope")]), BODY, NOW),
            CredentialCheck::ApiKey {
                header: DEFAULT_API_KEY_HEADER.into(),
                key: Secret::new("k-123"),
            }
            .verify(&headers(&[("X-API-Key", "k-12")]), BODY, NOW),
        ];
        for failure in failures {
            let text = failure.expect_err("fails").to_string();
            for secret in ["s3cret-token", "nope", "k-123", "k-12"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
    }
}
