//! The provider signature kinds of a source `auth` block and the `signing` block of an HTTP
//! destination. The provider kinds share their keys (`secrets`, `timestampTolerance`), so
//! `type` selects them: the required-keys rule of the other kinds cannot tell them apart.

use super::auth::read_inbound;
use super::{Case, Floor, choice, millis, text};
use crate::catalog::Doc;
use crate::model::{InboundAuth, SignedAuth, Signing, SigningScheme};
use crate::reader::{Block, Reader};
use queuebox_domain::inbox::signatures::{BadSecret, Scheme, check_secrets};
use queuebox_domain::secret::Secret;
use serde_json::Value;

/// Every `auth.type` of a source, as the reference lists them.
const SOURCE_AUTH_TYPES: &str = "`bearer`, `api-key`, `hmac`, `standardWebhooks`, `stripe`, `github`, `shopify`, `slack` (any letter case)";

/// The auth kinds that supply the idempotency key when the source sets no `idempotencyKeyPath`.
pub(crate) const KEY_DEFAULT_KINDS: &str = "standardWebhooks, stripe, github or shopify";

/// The `auth` block of an HTTP source: a provider signature kind when its `type` names one,
/// otherwise a bearer, API-key or HMAC block.
pub(crate) fn read_source_auth(r: &mut Reader, parent: &mut Block<'_>) -> Option<InboundAuth> {
    let path = parent.path_of("auth");
    let scheme = declared_scheme(parent.get("auth"));
    let Some(scheme) = scheme else {
        if let Some(declared) = declared_type(parent.get("auth"))
            && !["bearer", "api-key", "hmac"]
                .iter()
                .any(|kind| kind.eq_ignore_ascii_case(declared.trim()))
        {
            // Reported first, so it wins over the shorter list of the general reader.
            r.problem(
                format!("{path}.type"),
                format!(
                    "must be one of bearer, api-key, hmac, standardWebhooks, stripe, github, shopify, slack, got `{declared}`"
                ),
            );
        }
        let auth = read_inbound(r, parent);
        r.describe(
            &format!("{path}.type"),
            Doc::default().allowed(SOURCE_AUTH_TYPES),
        );
        return auth;
    };
    r.describe(&path, Doc::ty("block"));
    let value = parent.get("auth");
    let mut b = Block::open(r, value, &path);
    r.describe(
        &b.path_of("type"),
        Doc::default()
            .default_text("required")
            .allowed(SOURCE_AUTH_TYPES),
    );
    let _ = text(r, &mut b, "type");
    r.record_kind(b.path(), scheme.name());
    let secrets = secret_list(r, &mut b, scheme);
    let timestamp_tolerance = scheme.has_timestamp().then(|| {
        millis(
            r,
            &mut b,
            "timestampTolerance",
            300_000,
            // The schemes sign whole seconds.
            Floor::AtLeast(1000),
        )
    });
    b.finish(r);
    Some(InboundAuth::of_scheme(
        scheme,
        SignedAuth {
            secrets,
            timestamp_tolerance,
        },
    ))
}

/// The `type` text of an `auth` block, if it has one.
fn declared_type(auth: Option<&Value>) -> Option<&str> {
    let Some(Value::Object(map)) = auth else {
        return None;
    };
    map.iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("type"))
        .and_then(|(_, value)| value.as_str())
}

/// The provider scheme an `auth` block's `type` names, if any.
fn declared_scheme(auth: Option<&Value>) -> Option<Scheme> {
    declared_type(auth).and_then(Scheme::from_name)
}

/// Whether a source with this `auth` reads its event type from a header by default.
pub(crate) fn supplies_event_type(auth: Option<&InboundAuth>) -> bool {
    auth.and_then(InboundAuth::signed)
        .is_some_and(|(scheme, _)| scheme.default_event_type_header().is_some())
}

/// `secrets`: a list of one or more secrets (`file:` and `${VAR}` allowed), each a valid key of
/// `scheme`.
fn secret_list(r: &mut Reader, b: &mut Block<'_>, scheme: Scheme) -> Vec<Secret> {
    let path = b.path_of("secrets");
    r.describe(&path, Doc::ty("list of strings").default_text("required"));
    let secrets: Vec<Secret> = match b.get("secrets") {
        None => {
            r.problem(
                path.clone(),
                "is required: at least one secret (two while rotating)",
            );
            return Vec::new();
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                r.secret(Some(item), &format!("{path}[{i}]"))
                    .unwrap_or_default()
            })
            .collect(),
        // One secret written as a scalar is a list of one.
        Some(value @ Value::String(_)) => r.secret(Some(value), &path).into_iter().collect(),
        Some(_) => {
            r.problem(path.clone(), "must be a list of secrets");
            return Vec::new();
        }
    };
    if let Err(bad) = check_secrets(scheme, &secrets) {
        let (at, message) = match bad {
            BadSecret::None => (path, "must hold at least one secret".to_owned()),
            BadSecret::Empty { index } => (format!("{path}[{index}]"), "must not be empty".into()),
            BadSecret::NotBase64 { index } => (
                format!("{path}[{index}]"),
                "must be `whsec_` followed by base64 (the Standard Webhooks secret form)".into(),
            ),
        };
        r.problem(at, message);
    }
    secrets
}

/// The optional `signing` block of an HTTP destination.
pub(crate) fn read_signing(r: &mut Reader, parent: &mut Block<'_>) -> Option<Signing> {
    let path = parent.path_of("signing");
    r.describe(&path, Doc::ty("block"));
    let value = parent.get("signing")?;
    let mut b = Block::open(r, Some(value), &path);
    let scheme = choice(
        r,
        &mut b,
        "scheme",
        &[("standardWebhooks", SigningScheme::StandardWebhooks)],
        Case::Any,
        SigningScheme::StandardWebhooks,
    );
    let secrets = secret_list(r, &mut b, Scheme::StandardWebhooks);
    b.finish(r);
    Some(Signing { scheme, secrets })
}

/// `idempotencyKeyPath` of an HTTP source: required, unless the source's `auth` kind supplies
/// the key (Stripe: the body's `$.id`; Standard Webhooks, GitHub, Shopify: a header, written
/// here as an empty path).
pub(crate) fn http_key_path(
    r: &mut Reader,
    b: &mut Block<'_>,
    auth: Option<&InboundAuth>,
) -> String {
    let path = b.path_of("idempotencyKeyPath");
    r.describe(
        &path,
        Doc::default().default_text("required; a provider `auth` kind may supply it"),
    );
    let written = text(r, b, "idempotencyKeyPath");
    if let Some(value) = written.as_ref().filter(|v| !v.trim().is_empty()) {
        return value.clone();
    }
    if let Some((scheme, _)) = auth.and_then(InboundAuth::signed) {
        if let Some(default) = scheme.default_key_path() {
            return default.to_owned();
        }
        if scheme.default_key_header().is_some() {
            return String::new();
        }
    }
    if written.is_some() {
        r.problem(path, "must not be blank");
    } else if !b.has("idempotencyKeyPath") {
        r.problem(
            path,
            format!(
                "is required by a source of type http (an auth of type {KEY_DEFAULT_KINDS} supplies a default)"
            ),
        );
    }
    String::new()
}
