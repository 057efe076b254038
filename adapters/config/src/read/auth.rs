//! `auth` blocks: the inbound kinds (`bearer`, `api-key`, `hmac`) of sources and `admin.auth`, and
//! the outbound kinds (`oauth2`, `basic`, `header`) of HTTP destinations.

use super::kind::{KindKeys, select};
use super::{Case, Floor, choice, millis, required, secret, text, text_or};
use crate::catalog::Doc;
use crate::model::{HmacAlgorithm, HmacAuth, InboundAuth, OutboundAuth, SignaturePayloadFormat};
use crate::reader::{Block, Reader};
use crate::url::check_http_url;
use queuebox_domain::secret::Secret;

/// The inbound auth kinds, as [`select`] tells them apart.
#[derive(Clone, Copy)]
enum Inbound {
    Bearer,
    ApiKey,
    Hmac,
}

const INBOUND: &[KindKeys<Inbound>] = &[
    KindKeys {
        kind: Inbound::Bearer,
        name: "bearer",
        keys: &["token"],
    },
    KindKeys {
        kind: Inbound::ApiKey,
        name: "api-key",
        keys: &["key"],
    },
    KindKeys {
        kind: Inbound::Hmac,
        name: "hmac",
        keys: &["secret"],
    },
];

/// The outbound auth kinds, as [`select`] tells them apart.
#[derive(Clone, Copy)]
enum Outbound {
    Oauth2,
    Basic,
    Header,
}

const OUTBOUND: &[KindKeys<Outbound>] = &[
    KindKeys {
        kind: Outbound::Oauth2,
        name: "oauth2",
        keys: &["clientId", "clientSecret", "tokenUrl"],
    },
    KindKeys {
        kind: Outbound::Basic,
        name: "basic",
        keys: &["username", "password"],
    },
    KindKeys {
        kind: Outbound::Header,
        name: "header",
        keys: &["headerValue"],
    },
];

/// A credential that must be set and must not be empty: an empty inbound credential would let any
/// caller through.
fn credential(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Secret {
    let path = b.path_of(key);
    r.describe(&path, Doc::default().default_text("required"));
    match secret(r, b, key) {
        Some(secret) if secret.is_empty() => {
            r.problem(path, "must not be empty");
            secret
        }
        Some(secret) => secret,
        None => Secret::default(),
    }
}

/// The inbound `auth` block under `parent`, if set.
pub(crate) fn read_inbound(r: &mut Reader, parent: &mut Block<'_>) -> Option<InboundAuth> {
    // An optional block: declared here, because an absent one is never opened.
    r.describe(&parent.path_of("auth"), Doc::ty("block"));
    let value = parent.get("auth")?;
    let mut b = Block::open(r, Some(value), &parent.path_of("auth"));
    let auth = select(r, &mut b, "an auth block", INBOUND).map(|kind| match kind {
        Inbound::Bearer => InboundAuth::Bearer {
            token: credential(r, &mut b, "token"),
        },
        Inbound::ApiKey => InboundAuth::ApiKey {
            header_name: text_or(r, &mut b, "headerName", "X-API-Key"),
            key: credential(r, &mut b, "key"),
        },
        Inbound::Hmac => InboundAuth::Hmac(read_hmac(r, &mut b)),
    });
    b.finish(r);
    auth
}

fn read_hmac(r: &mut Reader, b: &mut Block<'_>) -> HmacAuth {
    let secret = credential(r, b, "secret");
    let header_name = text_or(r, b, "headerName", "X-Signature");
    let algorithm = choice(
        r,
        b,
        "algorithm",
        &[
            ("HmacSHA256", HmacAlgorithm::Sha256),
            ("HmacSHA512", HmacAlgorithm::Sha512),
        ],
        Case::Exact,
        HmacAlgorithm::Sha256,
    );
    let signature_prefix = text_or(r, b, "signaturePrefix", "sha256=");
    let timestamp_header = text(r, b, "timestampHeader").filter(|h| !h.trim().is_empty());
    let timestamp_tolerance = millis(r, b, "timestampTolerance", 300_000, Floor::AboveZero);
    let default_format = if timestamp_header.is_some() {
        SignaturePayloadFormat::TimestampDotBody
    } else {
        SignaturePayloadFormat::Body
    };
    let format_path = b.path_of("signaturePayloadFormat");
    let explicit_format = b.has("signaturePayloadFormat");
    let signature_payload_format = choice(
        r,
        b,
        "signaturePayloadFormat",
        &[
            ("BODY", SignaturePayloadFormat::Body),
            ("body", SignaturePayloadFormat::Body),
            (
                "TIMESTAMP_DOT_BODY",
                SignaturePayloadFormat::TimestampDotBody,
            ),
            (
                "timestamp-dot-body",
                SignaturePayloadFormat::TimestampDotBody,
            ),
        ],
        Case::Exact,
        default_format,
    );
    // The default depends on `timestampHeader`, so the catalog states it in words.
    r.describe(
        &format_path,
        Doc::default().default_text("`BODY`; `TIMESTAMP_DOT_BODY` when `timestampHeader` is set"),
    );
    if explicit_format
        && signature_payload_format == SignaturePayloadFormat::TimestampDotBody
        && timestamp_header.is_none()
    {
        r.problem(
            format_path,
            "TIMESTAMP_DOT_BODY signs the timestamp header, so it needs timestampHeader",
        );
    }
    HmacAuth {
        secret,
        header_name,
        algorithm,
        signature_prefix,
        timestamp_header,
        timestamp_tolerance,
        signature_payload_format,
    }
}

/// The outbound `auth` block of an HTTP destination, if set.
pub(crate) fn read_outbound(r: &mut Reader, parent: &mut Block<'_>) -> Option<OutboundAuth> {
    // An optional block: declared here, because an absent one is never opened.
    r.describe(&parent.path_of("auth"), Doc::ty("block"));
    let value = parent.get("auth")?;
    let mut b = Block::open(r, Some(value), &parent.path_of("auth"));
    let auth = match select(r, &mut b, "an auth block", OUTBOUND) {
        Some(Outbound::Oauth2) => {
            let client_id = required(r, &mut b, "clientId");
            let client_secret = secret(r, &mut b, "clientSecret").unwrap_or_default();
            let token_url = required(r, &mut b, "tokenUrl");
            if !token_url.is_empty()
                && let Err(message) = check_http_url(&token_url)
            {
                r.problem(b.path_of("tokenUrl"), message);
            }
            let scope = text(r, &mut b, "scope");
            let params_value = b.get("extraParams");
            let extra_params = r.text_map(params_value, &b.path_of("extraParams"));
            Some(OutboundAuth::Oauth2 {
                client_id,
                client_secret,
                token_url,
                scope,
                extra_params,
            })
        }
        Some(Outbound::Basic) => {
            let username = required(r, &mut b, "username");
            let password = secret(r, &mut b, "password").unwrap_or_default();
            Some(OutboundAuth::Basic { username, password })
        }
        Some(Outbound::Header) => {
            let header_name = text_or(r, &mut b, "headerName", "Authorization");
            let header_value = secret(r, &mut b, "headerValue").unwrap_or_default();
            Some(OutboundAuth::Header {
                header_name,
                header_value,
            })
        }
        None => None,
    };
    b.finish(r);
    auth
}
