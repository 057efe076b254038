//! No configured secret appears in `render_effective` or in `Debug` of the settings.
#![allow(clippy::unwrap_used)]

mod common;
use common::load_yaml;
use queuebox_config::render_effective;

const SECRETS: [&str; 12] = [
    "DBPASS-1",
    "URLPASS-2",
    "ADMINTOK-3",
    "CLIENTSEC-4",
    "BASICPW-5",
    "HEADERVAL-6",
    "SASLPW-7",
    "NATSTOKEN-8",
    "HMACSEC-9",
    "AMQPPW-10",
    "CAPTUREPW-11",
    "NATSPW-12",
];

fn secret_config() -> String {
    r#"database:
  url: jdbc:postgresql://db:5432/queuebox?password=URLPASS-2
  username: queuebox
  password: DBPASS-1
  migrate: false
outbox:
  capture:
    connection:
      password: CAPTUREPW-11
admin:
  enabled: true
  auth:
    type: bearer
    token: ADMINTOK-3
destinations:
  o:
    baseUrl: https://o.example.com
    auth:
      type: oauth2
      clientId: c
      clientSecret: CLIENTSEC-4
      tokenUrl: https://auth.example.com/t
  b:
    baseUrl: https://b.example.com
    auth:
      type: basic
      username: u
      password: BASICPW-5
  h:
    baseUrl: https://h.example.com
    auth:
      type: header
      headerValue: HEADERVAL-6
  k:
    bootstrapServers: b:9092
    topic: t
    securityProtocol: SASL_SSL
    saslMechanism: PLAIN
    saslUsername: u
    saslPassword: SASLPW-7
  n:
    servers: nats://user:NATSPW-12@n:4222
    subject: s
    token: NATSTOKEN-8
  r:
    url: amqp://guest:AMQPPW-10@rabbit:5672
    exchange: e
sources:
  s:
    path: /s
    idempotencyKeyPath: $.id
    consumption: pull
    auth:
      type: hmac
      secret: HMACSEC-9
"#
    .to_owned()
}

#[test]
fn render_effective_masks_every_secret() {
    let loaded = load_yaml(&secret_config(), &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.settings.destinations.len(), 6);
    let settings = loaded.settings;
    let yaml = render_effective(&settings);
    for secret in SECRETS {
        assert!(!yaml.contains(secret), "{secret} leaked into:\n{yaml}");
    }
    assert!(yaml.contains("Secret(***)"), "{yaml}");
    assert!(yaml.contains("amqp://guest:***@rabbit:5672"), "{yaml}");
    assert!(yaml.contains("password=***"), "{yaml}");
    // The rendered file is YAML with the original key names.
    let reparsed: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(
        reparsed["server"]["httpPort"],
        serde_yaml::Value::from(8080)
    );
    assert_eq!(
        reparsed["destinations"]["o"]["type"],
        serde_yaml::Value::from("http")
    );
    assert_eq!(
        reparsed["destinations"]["o"]["auth"]["type"],
        serde_yaml::Value::from("oauth2")
    );
    assert_eq!(
        reparsed["database"]["columnMapping"]["outbox"]["maxAttempts"],
        serde_yaml::Value::from("max_attempts")
    );
}

#[test]
fn debug_of_the_settings_masks_every_secret() {
    let settings = load_yaml(&secret_config(), &[]).unwrap().settings;
    let debug = format!("{settings:?} {:?}", settings.database_options());
    for secret in SECRETS {
        assert!(!debug.contains(secret), "{secret} leaked into Debug output");
    }
    assert!(debug.contains("Secret(***)"));
}

#[test]
fn an_empty_secret_prints_as_empty() {
    let settings = load_yaml(
        "database:\n  url: jdbc:postgresql://db/q\n  username: u\n  password: \"\"\n",
        &[],
    )
    .unwrap()
    .settings;
    assert!(format!("{:?}", settings.database.password).contains("Secret(empty)"));
    assert!(render_effective(&settings).contains("Secret(empty)"));
}

#[test]
fn render_shows_the_defaults() {
    let settings = load_yaml(common::BASE, &[]).unwrap().settings;
    let yaml = render_effective(&settings);
    for expected in [
        "pollIntervalMs: 100",
        "batchSize: 100",
        "basePath: /inbox",
        "cleanupInterval: 1h",
        "mode: polling",
    ] {
        assert!(yaml.contains(expected), "{expected} missing from:\n{yaml}");
    }
}
