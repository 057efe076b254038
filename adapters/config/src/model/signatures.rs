//! The provider signature kinds of a source `auth` block (`standardWebhooks`, `stripe`,
//! `github`, `shopify`, `slack`) and the `signing` block of an HTTP destination.

use super::InboundAuth;
use crate::render::ms;
use queuebox_domain::inbox::signatures::Scheme;
use queuebox_domain::secret::Secret;
use serde::{Serialize, Serializer};
use std::time::Duration;

/// The keys of a provider signature `auth` block.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedAuth {
    /// One or more secrets; several while a sender rotates its secret.
    #[serde(serialize_with = "masked_list")]
    pub secrets: Vec<Secret>,
    /// How far the signed timestamp may be from the clock (the schemes that sign one).
    #[serde(
        rename = "timestampTolerance",
        serialize_with = "opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub timestamp_tolerance: Option<Duration>,
}

/// `signing` on an HTTP destination.
#[derive(Debug, Clone, Serialize)]
pub struct Signing {
    /// Always `standardWebhooks` today.
    pub scheme: SigningScheme,
    /// `whsec_<base64>` secrets; one `v1,` entry per secret in `webhook-signature`.
    #[serde(serialize_with = "masked_list")]
    pub secrets: Vec<Secret>,
}

/// The outbound signature schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SigningScheme {
    #[serde(rename = "standardWebhooks")]
    StandardWebhooks,
}

impl InboundAuth {
    /// The provider scheme and keys of a signature `auth` block; `None` for bearer, API key and
    /// HMAC.
    pub fn signed(&self) -> Option<(Scheme, &SignedAuth)> {
        match self {
            InboundAuth::StandardWebhooks(auth) => Some((Scheme::StandardWebhooks, auth)),
            InboundAuth::Stripe(auth) => Some((Scheme::Stripe, auth)),
            InboundAuth::Github(auth) => Some((Scheme::Github, auth)),
            InboundAuth::Shopify(auth) => Some((Scheme::Shopify, auth)),
            InboundAuth::Slack(auth) => Some((Scheme::Slack, auth)),
            InboundAuth::Bearer { .. } | InboundAuth::ApiKey { .. } | InboundAuth::Hmac(_) => None,
        }
    }

    /// A signature `auth` block of `scheme`.
    pub(crate) fn of_scheme(scheme: Scheme, auth: SignedAuth) -> Self {
        match scheme {
            Scheme::StandardWebhooks => InboundAuth::StandardWebhooks(auth),
            Scheme::Stripe => InboundAuth::Stripe(auth),
            Scheme::Github => InboundAuth::Github(auth),
            Scheme::Shopify => InboundAuth::Shopify(auth),
            Scheme::Slack => InboundAuth::Slack(auth),
        }
    }
}

fn masked_list<S: Serializer>(secrets: &[Secret], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(secrets.iter().map(Secret::mask))
}

fn opt_ms<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => ms(value, serializer),
        None => serializer.serialize_none(),
    }
}
