//! The ingest pipeline's view of each configured source: what the `sources.<name>` block says
//! beyond its kind's connection keys (paths, consumption, credentials, filter, rate limit,
//! transform). Starting the sources is the business of their kind's wiring module
//! (`crate::backends`).

use crate::backends;
use crate::transforms::Transforms;
use anyhow::Context as _;
use queuebox_application::ingest::{AttributeHeaders, IngestKind, IngestSource};
use queuebox_config::{
    AttributeHeaders as ConfiguredAttributeHeaders, Consumption as ConfiguredConsumption,
    FilterCondition, FilterRule, HeaderFilter as Filter, HmacAlgorithm as ConfiguredAlgorithm,
    InboundAuth, Settings, SignaturePayloadFormat, Source, SourceKind,
};
use queuebox_domain::glob::TopicPattern;
use queuebox_domain::inbox::auth::{CredentialCheck, HmacAlgorithm, HmacCheck, TimestampRule};
use queuebox_domain::inbox::filter::{Condition, HeaderFilter, HeaderRule};
use queuebox_domain::inbox::signatures::{DEFAULT_TOLERANCE_SECONDS, Scheme, SignatureCheck};
use queuebox_domain::jsonpath::JsonPath;
use queuebox_ports::inbox::Consumption;

/// The pipeline view of every source, with its compiled transform.
///
/// # Errors
/// A path or glob that does not compile (the configuration loader checks them first, so this is a
/// last guard).
pub fn sources(settings: &Settings, transforms: &Transforms) -> anyhow::Result<Vec<IngestSource>> {
    let mut specs = Vec::with_capacity(settings.sources.len());
    for (name, source) in &settings.sources {
        let mut spec = ingest_source(name, source).with_context(|| format!("sources.{name}"))?;
        spec.transform = transforms.sources.get(name).cloned();
        specs.push(spec);
    }
    Ok(specs)
}

fn ingest_source(name: &str, source: &Source) -> anyhow::Result<IngestSource> {
    let path = |key: &str, text: &str| {
        JsonPath::parse(text).with_context(|| format!("{key} `{text}` is not a definite JSONPath"))
    };
    let optional_path = |key: &str, text: Option<&String>| {
        text.filter(|t| !t.trim().is_empty())
            .map(|t| path(key, t))
            .transpose()
    };
    // The auth block and the rate limit belong to HTTP sources; the other kinds ignore them.
    let (auth, requests_per_minute) = if let SourceKind::Http(http) = &source.kind {
        (
            http.auth
                .as_ref()
                .map(|auth| with_default_attributes(credential_check(auth), source)),
            source.rate_limit.map(|limit| limit.requests_per_minute),
        )
    } else {
        (None, None)
    };
    Ok(IngestSource {
        name: name.to_owned(),
        // Empty when a provider auth kind supplies the key from a header; the path is not read.
        idempotency_key_path: path(
            "idempotencyKeyPath",
            if source.idempotency_key_path.trim().is_empty() {
                "$"
            } else {
                &source.idempotency_key_path
            },
        )?,
        event_type_path: optional_path("eventTypePath", source.event_type_path.as_ref())?,
        aggregate_id_path: optional_path("aggregateIdPath", source.aggregate_id_path.as_ref())?,
        consumption: match source.consumption {
            ConfiguredConsumption::Push => Consumption::Push,
            ConfiguredConsumption::Pull => Consumption::Pull,
        },
        auth,
        filter: source.filter.as_ref().map(header_filter).transpose()?,
        requests_per_minute,
        // A broker kind's entry in the backend table says where its `attributeHeaders` are.
        kind: backends::attribute_headers(&source.kind).map_or(IngestKind::Http, broker_kind),
        transform: None,
    })
}

/// A broker source with the header names of its `attributeHeaders`.
fn broker_kind(headers: &ConfiguredAttributeHeaders) -> IngestKind {
    IngestKind::Broker(AttributeHeaders {
        idempotency_key: headers.idempotency_key.clone(),
        aggregate_id: headers.aggregate_id.clone(),
        event_type: headers.event_type.clone(),
    })
}

/// The domain check of an `auth` block.
pub fn credential_check(auth: &InboundAuth) -> CredentialCheck {
    match auth {
        InboundAuth::Bearer { token } => CredentialCheck::Bearer {
            token: token.clone(),
        },
        InboundAuth::ApiKey { header_name, key } => CredentialCheck::ApiKey {
            header: header_name.clone(),
            key: key.clone(),
        },
        InboundAuth::StandardWebhooks(_)
        | InboundAuth::Stripe(_)
        | InboundAuth::Github(_)
        | InboundAuth::Shopify(_)
        | InboundAuth::Slack(_) => signature_check(auth),
        InboundAuth::Hmac(hmac) => CredentialCheck::Hmac(HmacCheck {
            secret: hmac.secret.clone(),
            header: hmac.header_name.clone(),
            algorithm: match hmac.algorithm {
                ConfiguredAlgorithm::Sha256 => HmacAlgorithm::Sha256,
                ConfiguredAlgorithm::Sha512 => HmacAlgorithm::Sha512,
            },
            signature_prefix: hmac.signature_prefix.clone(),
            // The loader refuses `timestamp-dot-body` without a timestamp header, so a missing
            // header always means the body alone is signed.
            timestamp: hmac.timestamp_header.as_ref().map(|header| TimestampRule {
                header: header.clone(),
                tolerance_ms: u64::try_from(hmac.timestamp_tolerance.as_millis())
                    .unwrap_or(u64::MAX),
                signed: hmac.signature_payload_format == SignaturePayloadFormat::TimestampDotBody,
            }),
        }),
    }
}

/// The check of a provider signature `auth` block.
fn signature_check(auth: &InboundAuth) -> CredentialCheck {
    let Some((scheme, signed)) = auth.signed() else {
        return CredentialCheck::Signature(SignatureCheck::refusing(Scheme::StandardWebhooks));
    };
    let tolerance_seconds = signed
        .timestamp_tolerance
        .map_or(DEFAULT_TOLERANCE_SECONDS, |tolerance| tolerance.as_secs());
    CredentialCheck::Signature(
        SignatureCheck::new(scheme, &signed.secrets, tolerance_seconds)
            .unwrap_or_else(|_| SignatureCheck::refusing(scheme)),
    )
}

/// A provider check with the headers its scheme reads the idempotency key and the event type
/// from, when the source sets no path for them.
fn with_default_attributes(check: CredentialCheck, source: &Source) -> CredentialCheck {
    let CredentialCheck::Signature(mut signature) = check else {
        return check;
    };
    let scheme = signature.scheme();
    if source.idempotency_key_path.trim().is_empty() {
        signature.key_header = scheme.default_key_header().map(str::to_owned);
    }
    if source
        .event_type_path
        .as_ref()
        .is_none_or(|path| path.trim().is_empty())
    {
        signature.event_type_header = scheme.default_event_type_header().map(str::to_owned);
    }
    CredentialCheck::Signature(signature)
}

fn header_filter(filter: &Filter) -> anyhow::Result<HeaderFilter> {
    let rules = |list: &[FilterRule], key: &str| -> anyhow::Result<Vec<HeaderRule>> {
        list.iter()
            .enumerate()
            .map(|(index, rule)| {
                let condition = match &rule.condition {
                    FilterCondition::Equals(value) => Condition::Equals(value.clone()),
                    FilterCondition::In(values) => Condition::OneOf(values.clone()),
                    FilterCondition::Matches(glob) => Condition::Matches(
                        TopicPattern::compile(glob)
                            .with_context(|| format!("filter.{key}[{index}].matches"))?,
                    ),
                    // `exists: false` does not load.
                    FilterCondition::Exists(_) => Condition::Exists,
                };
                Ok(HeaderRule {
                    header: rule.header.clone(),
                    condition,
                })
            })
            .collect()
    };
    Ok(HeaderFilter {
        require: rules(&filter.require, "require")?,
        exclude: rules(&filter.exclude, "exclude")?,
    })
}
