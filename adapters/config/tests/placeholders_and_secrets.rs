//! `${NAME}` placeholders, `file:` secrets, and fields where `file:` stays literal.
#![allow(clippy::unwrap_used)]

mod common;
use common::{BASE, load_yaml};
use queuebox_config::{DestinationKind, InboundAuth, SourceKind};

#[test]
fn a_placeholder_reads_the_given_environment() {
    let loaded = load_yaml(
        "database:\n  url: jdbc:postgresql://${DB_HOST}:5432/queuebox\n  username: queuebox\n  password: ${DB_PASSWORD}\n",
        &[("DB_HOST", "db.internal"), ("DB_PASSWORD", "s3cret")],
    )
    .unwrap();
    assert_eq!(loaded.settings.database.target.hosts[0].host, "db.internal");
    assert_eq!(loaded.settings.database.password.expose(), "s3cret");
}

#[test]
fn a_fallback_applies_when_the_variable_is_unset() {
    let yaml = format!("{BASE}server:\n  httpPort: ${{PORT:-8181}}\n");
    assert_eq!(
        load_yaml(&yaml, &[]).unwrap().settings.server.http_port,
        8181
    );
    assert_eq!(
        load_yaml(&yaml, &[("PORT", "9191")])
            .unwrap()
            .settings
            .server
            .http_port,
        9191
    );
}

#[test]
fn an_unset_placeholder_without_fallback_names_the_key() {
    let error = load_yaml(
        "database:\n  url: jdbc:postgresql://db/q\n  username: queuebox\n  password: ${DB_PASSWORD}\n",
        &[],
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("database.password (QUEUEBOX_DATABASE_PASSWORD): placeholder ${DB_PASSWORD} has no value"),
        "{text}"
    );
}

#[test]
fn a_placeholder_works_inside_a_variable_value_too() {
    let loaded = load_yaml(BASE, &[("QUEUEBOX_SERVER_HTTPPORT", "${P:-7000}")]).unwrap();
    assert_eq!(loaded.settings.server.http_port, 7000);
}

#[test]
fn a_variable_read_by_a_placeholder_is_not_an_unknown_key() {
    let yaml = "database:\n  url: jdbc:postgresql://db/q\n  username: u\n  password: ${QUEUEBOX_DB_PASSWORD:-x}\n";
    let loaded = load_yaml(yaml, &[("QUEUEBOX_DB_PASSWORD", "pw")]).unwrap();
    assert_eq!(loaded.settings.database.password.expose(), "pw");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn a_file_secret_is_read_without_its_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db-password");
    let hmac = dir.path().join("hmac");
    std::fs::write(&db, "from-file\n").unwrap();
    std::fs::write(&hmac, "whsec_x\n").unwrap();
    let yaml = format!(
        "database:\n  url: jdbc:postgresql://db/q\n  username: u\n  password: file:{}\nsources:\n  stripe:\n    path: /stripe\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    auth:\n      type: hmac\n      secret: file:{}\n",
        db.display(),
        hmac.display()
    );
    let settings = load_yaml(&yaml, &[]).unwrap().settings;
    assert_eq!(settings.database.password.expose(), "from-file");
    assert_eq!(
        settings.database_options().target.password.expose(),
        "from-file"
    );
    let SourceKind::Http(http) = &settings.sources["stripe"].kind else {
        panic!("http")
    };
    let Some(InboundAuth::Hmac(auth)) = &http.auth else {
        panic!("hmac")
    };
    assert_eq!(auth.secret.expose(), "whsec_x");
}

#[test]
fn a_file_secret_through_a_variable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    std::fs::write(&file, "env-file-pw\n").unwrap();
    let value = format!("file:{}", file.display());
    let loaded = load_yaml(BASE, &[("QUEUEBOX_DATABASE_PASSWORD", &value)]).unwrap();
    assert_eq!(loaded.settings.database.password.expose(), "env-file-pw");
}

#[test]
fn a_missing_secret_file_names_the_key() {
    let error = load_yaml(
        "database:\n  url: jdbc:postgresql://db/q\n  username: u\n  password: file:/nonexistent/secret\n",
        &[],
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("database.password (QUEUEBOX_DATABASE_PASSWORD): cannot read secret file /nonexistent/secret"),
        "{text}"
    );
}

#[test]
fn file_on_the_database_url_stays_literal_and_fails_validation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("url");
    std::fs::write(&file, "jdbc:postgresql://db/q\n").unwrap();
    let yaml = format!(
        "database:\n  url: file:{}\n  username: u\n  password: p\n",
        file.display()
    );
    let error = load_yaml(&yaml, &[]).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("database.url (QUEUEBOX_DATABASE_URL): must start with"),
        "{text}"
    );
    assert!(text.contains("file:"), "the literal value is shown: {text}");
}

#[test]
fn file_on_rabbitmq_urls_stays_literal() {
    let yaml = format!(
        "{BASE}destinations:\n  r:\n    url: file:/run/secrets/amqp\n    exchange: e\nsources:\n  q:\n    queueName: q\n    connectionUrl: file:/run/secrets/amqp\n"
    );
    let settings = load_yaml(&yaml, &[]).unwrap().settings;
    let DestinationKind::Rabbitmq(r) = &settings.destinations["r"].kind else {
        panic!("rabbitmq")
    };
    assert_eq!(r.url.expose(), "file:/run/secrets/amqp");
    let SourceKind::Rabbitmq(q) = &settings.sources["q"].kind else {
        panic!("rabbitmq")
    };
    assert_eq!(q.connection_url.expose(), "file:/run/secrets/amqp");
}

#[test]
fn a_file_reference_on_a_plain_field_stays_literal() {
    let yaml = format!(
        "{BASE}destinations:\n  a:\n    baseUrl: https://a.example.com\n    headers:\n      x-ref: file:/etc/hostname\n"
    );
    let settings = load_yaml(&yaml, &[]).unwrap().settings;
    assert_eq!(
        settings.destinations["a"].headers["x-ref"],
        "file:/etc/hostname"
    );
}
