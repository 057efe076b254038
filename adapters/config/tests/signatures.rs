//! The provider signature kinds of a source `auth` block and `signing` on an HTTP destination:
//! what loads, what is refused with which message, and that no secret is ever printed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{BASE, assert_refused, load_yaml, ok};
use queuebox_config::{DestinationKind, InboundAuth, SourceKind, render_effective};
use queuebox_domain::inbox::signatures::Scheme;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn source(auth: &str, extra: &str) -> String {
    format!("sources:\n  s:\n    path: /s\n    consumption: pull\n{extra}    auth:\n{auth}")
}

#[test]
fn every_kind_loads_by_type_with_its_key_default() {
    for (kind, key_path) in [
        ("standardWebhooks", ""),
        ("stripe", "$.id"),
        ("github", ""),
        ("shopify", ""),
        ("StandardWebhooks", ""),
    ] {
        let loaded = ok(&source(
            &format!("      type: {kind}\n      secrets: [{SW_SECRET}]\n"),
            "",
        ));
        let s = &loaded.settings.sources["s"];
        assert_eq!(s.idempotency_key_path, key_path, "{kind}");
        let SourceKind::Http(http) = &s.kind else {
            panic!("http")
        };
        let (scheme, signed) = http.auth.as_ref().and_then(InboundAuth::signed).unwrap();
        assert_eq!(Some(scheme), Scheme::from_name(kind));
        assert_eq!(signed.secrets.len(), 1);
    }
}

#[test]
fn slack_and_the_classic_kinds_still_need_a_key_path() {
    assert_refused(
        &source("      type: slack\n      secrets: [s]\n", ""),
        "sources.s.idempotencyKeyPath",
        "QUEUEBOX_SOURCES_S_IDEMPOTENCYKEYPATH",
        "is required by a source of type http",
    );
    ok(&source(
        "      type: slack\n      secrets: [s]\n",
        "    idempotencyKeyPath: $.event_id\n",
    ));
}

#[test]
fn secrets_must_be_a_non_empty_list_of_keys() {
    assert_refused(
        &source("      type: github\n", ""),
        "sources.s.auth.secrets",
        "QUEUEBOX_SOURCES_S_AUTH_SECRETS",
        "is required",
    );
    assert_refused(
        &source("      type: github\n      secrets: []\n", ""),
        "sources.s.auth.secrets",
        "QUEUEBOX_SOURCES_S_AUTH_SECRETS",
        "at least one secret",
    );
    assert_refused(
        &source("      type: stripe\n      secrets: [a, \"\"]\n", ""),
        "sources.s.auth.secrets[1]",
        "QUEUEBOX_SOURCES_S_AUTH_SECRETS_1",
        "must not be empty",
    );
    assert_refused(
        &source(
            "      type: standardWebhooks\n      secrets: [\"whsec_not base64!\"]\n",
            "",
        ),
        "sources.s.auth.secrets[0]",
        "QUEUEBOX_SOURCES_S_AUTH_SECRETS_0",
        "`whsec_` followed by base64",
    );
    assert_refused(
        &source(
            "      type: slack\n      secrets: [s]\n      timestampTolerance: 10\n",
            "    idempotencyKeyPath: $.event_id\n",
        ),
        "sources.s.auth.timestampTolerance",
        "QUEUEBOX_SOURCES_S_AUTH_TIMESTAMPTOLERANCE",
        "at least 1000",
    );
}

#[test]
fn an_unknown_type_lists_every_kind_and_a_foreign_key_is_unknown() {
    assert_refused(
        &source(
            "      type: stripes\n      secrets: [s]\n",
            "    idempotencyKeyPath: $.id\n",
        ),
        "sources.s.auth.type",
        "QUEUEBOX_SOURCES_S_AUTH_TYPE",
        "standardWebhooks, stripe, github, shopify, slack, got `stripes`",
    );
    // GitHub signs no timestamp, so a tolerance is an unknown key (a warning, as every unknown key).
    let loaded = ok(&source(
        "      type: github\n      secrets: [s]\n      timestampTolerance: 1000\n",
        "",
    ));
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("sources.s.auth.timestampTolerance")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn secrets_come_from_files_and_env_and_are_masked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gh.secret");
    std::fs::write(&file, "from-a-file-1234").unwrap();
    let yaml = format!(
        "{BASE}{}destinations:\n  d:\n    baseUrl: http://127.0.0.1:9\n    signing:\n      secrets:\n        - ${{OUT_SECRET}}\n        - {SW_SECRET}\n",
        source(
            &format!(
                "      type: github\n      secrets:\n        - file:{}\n        - ${{GH_NEXT}}\n",
                file.display()
            ),
            ""
        )
    );
    let loaded = load_yaml(
        &yaml,
        &[
            ("GH_NEXT", "from-the-env-5678"),
            ("OUT_SECRET", "whsec_c2VjcmV0LWZyb20tZW52"),
        ],
    )
    .expect("loads");
    let SourceKind::Http(http) = &loaded.settings.sources["s"].kind else {
        panic!("http")
    };
    let (_, signed) = http.auth.as_ref().and_then(InboundAuth::signed).unwrap();
    assert_eq!(signed.secrets[0].expose(), "from-a-file-1234");
    assert_eq!(signed.secrets[1].expose(), "from-the-env-5678");
    let DestinationKind::Http(dest) = &loaded.settings.destinations["d"].kind else {
        panic!("http destination")
    };
    let signing = dest.signing.as_ref().expect("signing");
    assert_eq!(signing.secrets.len(), 2);
    let rendered = render_effective(&loaded.settings);
    let debug = format!("{:?}", loaded.settings);
    for secret in [
        "from-a-file-1234",
        "from-the-env-5678",
        "c2VjcmV0LWZyb20tZW52",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ] {
        assert!(!rendered.contains(secret), "{rendered}");
        assert!(!debug.contains(secret), "{secret} in Debug");
    }
    assert!(rendered.contains("type: github"), "{rendered}");
    assert!(rendered.contains("Secret(***)"), "{rendered}");
}

#[test]
fn signing_needs_standard_webhooks_secrets() {
    assert_refused(
        "destinations:\n  d:\n    baseUrl: http://x\n    signing:\n      scheme: standardWebhooks\n",
        "destinations.d.signing.secrets",
        "QUEUEBOX_DESTINATIONS_D_SIGNING_SECRETS",
        "is required",
    );
    assert_refused(
        "destinations:\n  d:\n    baseUrl: http://x\n    signing:\n      secrets: [plain-text!]\n",
        "destinations.d.signing.secrets[0]",
        "QUEUEBOX_DESTINATIONS_D_SIGNING_SECRETS_0",
        "`whsec_` followed by base64",
    );
    assert_refused(
        "destinations:\n  d:\n    baseUrl: http://x\n    signing:\n      scheme: hmac\n      secrets: [whsec_c2VjcmV0]\n",
        "destinations.d.signing.scheme",
        "QUEUEBOX_DESTINATIONS_D_SIGNING_SCHEME",
        "must be one of standardWebhooks",
    );
}
