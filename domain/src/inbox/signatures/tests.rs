use super::*;

fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

fn check(scheme: Scheme, secrets: &[&str]) -> SignatureCheck {
    let secrets: Vec<Secret> = secrets.iter().map(|s| Secret::new(*s)).collect();
    SignatureCheck::new(scheme, &secrets, DEFAULT_TOLERANCE_SECONDS).expect("valid secrets")
}

// GitHub's documented example ("Validating webhook deliveries").
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

// Slack's documented example ("Verifying requests from Slack").
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TS: &str = "1531420618";
const SLACK_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

// The example of the Standard Webhooks specification's reference tests.
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SW_TS: &str = "1614265330";
const SW_BODY: &str = r#"{"test": 2432232314}"#;
const SW_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

fn ms(seconds: &str) -> i64 {
    seconds.parse::<i64>().expect("seconds") * 1000
}

#[test]
fn github_documented_vector_passes_and_a_changed_byte_fails() {
    let c = check(Scheme::Github, &[GITHUB_SECRET]);
    let h = headers(&[("x-hub-signature-256", GITHUB_SIG)]);
    assert_eq!(c.verify(&h, b"Hello, World!", 0), Ok(()));
    assert_eq!(
        c.verify(&h, b"Hello, World?", 0),
        Err(SignatureFailure::Mismatch(GITHUB_SIGNATURE))
    );
    assert_eq!(
        c.verify(&headers(&[]), b"Hello, World!", 0),
        Err(SignatureFailure::MissingHeader(GITHUB_SIGNATURE))
    );
    assert!(matches!(
        c.verify(&headers(&[("X-Hub-Signature-256", "757107ea")]), b"x", 0),
        Err(SignatureFailure::Malformed { .. })
    ));
}

#[test]
fn slack_documented_vector_passes_within_the_tolerance_only() {
    let c = check(Scheme::Slack, &[SLACK_SECRET]);
    let h = headers(&[
        ("X-Slack-Request-Timestamp", SLACK_TS),
        ("X-Slack-Signature", SLACK_SIG),
    ]);
    assert_eq!(
        c.verify(&h, SLACK_BODY.as_bytes(), ms(SLACK_TS) + 60_000),
        Ok(())
    );
    assert_eq!(
        c.verify(&h, SLACK_BODY.as_bytes(), ms(SLACK_TS) + 301_000),
        Err(SignatureFailure::Stale {
            header: SLACK_TIMESTAMP,
            tolerance_seconds: 300
        })
    );
    let wrong = check(Scheme::Slack, &["8f742231b10e8888abcd99yyyzzz85a6"]);
    assert_eq!(
        wrong.verify(&h, SLACK_BODY.as_bytes(), ms(SLACK_TS)),
        Err(SignatureFailure::Mismatch(SLACK_SIGNATURE))
    );
}

#[test]
fn standard_webhooks_reference_vector_and_rotation() {
    let h = headers(&[
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", SW_SIG),
    ]);
    let c = check(Scheme::StandardWebhooks, &[SW_SECRET]);
    assert_eq!(c.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)), Ok(()));
    // Without the prefix, as the official libraries accept it.
    let bare = check(
        Scheme::StandardWebhooks,
        &["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    );
    assert_eq!(bare.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)), Ok(()));
    // Rotation: an old and a new secret, the request signed with either.
    let other = "whsec_dGhlIG5ldyBzZWNyZXQgb2YgdGhlIHJvdGF0aW9u";
    let rotated = check(Scheme::StandardWebhooks, &[other, SW_SECRET]);
    assert_eq!(rotated.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)), Ok(()));
    // The signer makes the same value.
    let signer = StandardWebhooksSigner::new(&[Secret::new(SW_SECRET)]).expect("signer");
    assert_eq!(signer.signature(SW_ID, SW_TS, SW_BODY.as_bytes()), SW_SIG);
    let both =
        StandardWebhooksSigner::new(&[Secret::new(other), Secret::new(SW_SECRET)]).expect("signer");
    let value = both.signature(SW_ID, SW_TS, SW_BODY.as_bytes());
    assert_eq!(value.split(' ').count(), 2);
    assert!(value.ends_with(SW_SIG), "{value}");
}

#[test]
fn standard_webhooks_any_entry_may_match_and_a_changed_byte_fails() {
    let c = check(Scheme::StandardWebhooks, &[SW_SECRET]);
    let multi = format!("v1,AAAA {SW_SIG} v2,ignored");
    let h = headers(&[
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", &multi),
    ]);
    assert_eq!(c.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)), Ok(()));
    // One byte changed in the matching entry.
    let changed = multi.replace("g0hM", "g0hN");
    let h = headers(&[
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", &changed),
    ]);
    assert_eq!(
        c.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)),
        Err(SignatureFailure::Mismatch(WEBHOOK_SIGNATURE))
    );
    // The id is signed: another id fails.
    let h = headers(&[
        ("webhook-id", "msg_other"),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", SW_SIG),
    ]);
    assert_eq!(
        c.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)),
        Err(SignatureFailure::Mismatch(WEBHOOK_SIGNATURE))
    );
}

#[test]
fn standard_webhooks_names_the_missing_header_and_the_stale_timestamp() {
    let c = check(Scheme::StandardWebhooks, &[SW_SECRET]);
    let h = headers(&[("webhook-id", SW_ID), ("webhook-timestamp", SW_TS)]);
    let failure = c
        .verify(&h, SW_BODY.as_bytes(), ms(SW_TS))
        .expect_err("fails");
    assert_eq!(failure.to_string(), "missing header webhook-signature");
    let h = headers(&[
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", SW_SIG),
    ]);
    let failure = c
        .verify(&h, SW_BODY.as_bytes(), ms(SW_TS) + 301_000)
        .expect_err("fails");
    assert!(
        failure
            .to_string()
            .starts_with("timestamp outside tolerance"),
        "{failure}"
    );
    let failure = c
        .verify(&h, SW_BODY.as_bytes(), ms(SW_TS) - 301_000)
        .expect_err("a future timestamp fails too");
    assert!(matches!(failure, SignatureFailure::Stale { .. }));
    let h = headers(&[
        ("webhook-id", SW_ID),
        ("webhook-timestamp", "soon"),
        ("webhook-signature", SW_SIG),
    ]);
    assert!(matches!(
        c.verify(&h, SW_BODY.as_bytes(), ms(SW_TS)),
        Err(SignatureFailure::Malformed { .. })
    ));
}

#[test]
fn stripe_signs_t_dot_body_and_accepts_any_v1_entry() {
    let secret = "whsec_test_secret";
    let body = br#"{"id":"evt_1","object":"event"}"#;
    let t = "1700000000";
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let sig = hex::encode(mac.finalize().into_bytes());
    let c = check(Scheme::Stripe, &["whsec_other", secret]);
    let value = format!("t={t},v1={},v1={sig},v0=ignored", "00".repeat(32));
    let h = headers(&[("Stripe-Signature", &value)]);
    assert_eq!(c.verify(&h, body, ms(t)), Ok(()));
    let h = headers(&[("Stripe-Signature", &format!("v1={sig}"))]);
    assert!(matches!(
        c.verify(&h, body, ms(t)),
        Err(SignatureFailure::Malformed { .. })
    ));
    let h = headers(&[("Stripe-Signature", &format!("t={t},v1={sig}"))]);
    assert_eq!(
        c.verify(&h, body, ms(t) + 3_600_000),
        Err(SignatureFailure::Stale {
            header: STRIPE_SIGNATURE,
            tolerance_seconds: 300
        })
    );
}

#[test]
fn secrets_are_checked_and_never_printed() {
    assert_eq!(
        SignatureCheck::new(Scheme::Github, &[], 300),
        Err(BadSecret::None)
    );
    assert_eq!(
        SignatureCheck::new(Scheme::Github, &[Secret::new("a"), Secret::new("")], 300),
        Err(BadSecret::Empty { index: 1 })
    );
    assert_eq!(
        SignatureCheck::new(Scheme::StandardWebhooks, &[Secret::new("whsec_!!!")], 300),
        Err(BadSecret::NotBase64 { index: 0 })
    );
    let c = check(Scheme::Shopify, &["shpss_very_secret"]);
    let printed = format!("{c:?}");
    assert!(!printed.contains("shpss_very_secret"), "{printed}");
    let failure = c
        .verify(&headers(&[("X-Shopify-Hmac-Sha256", "abc=")]), b"{}", 0)
        .expect_err("fails");
    assert!(!failure.to_string().contains("shpss"), "{failure}");
}

#[test]
fn scheme_names_and_defaults() {
    for (scheme, name) in Scheme::ALL {
        assert_eq!(scheme.name(), name);
        assert_eq!(Scheme::from_name(&name.to_uppercase()), Some(scheme));
    }
    assert_eq!(
        Scheme::StandardWebhooks.default_key_header(),
        Some("webhook-id")
    );
    assert_eq!(Scheme::Stripe.default_key_path(), Some("$.id"));
    assert_eq!(
        Scheme::Github.default_event_type_header(),
        Some("X-GitHub-Event")
    );
    assert_eq!(Scheme::Slack.default_key_header(), None);
}
