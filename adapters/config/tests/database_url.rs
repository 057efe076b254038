//! The accepted forms of `database.url`, and how `database.username`/`password` apply to them.
#![allow(clippy::unwrap_used)]

mod common;
use common::load_yaml;
use queuebox_config::Settings;
use queuebox_ports::database::DatabaseKind;

fn with_url(url: &str, credentials: &str) -> Settings {
    let yaml = format!("database:\n  url: \"{url}\"\n{credentials}");
    match load_yaml(&yaml, &[]) {
        Ok(loaded) => loaded.settings,
        Err(error) => panic!("{url}: {error}"),
    }
}

const CREDENTIALS: &str = "  username: queuebox\n  password: pw\n";

#[test]
fn single_host_without_port() {
    let target = with_url("jdbc:postgresql://db/queuebox", CREDENTIALS)
        .database_options()
        .target;
    assert_eq!(target.kind, DatabaseKind::Postgresql);
    assert_eq!(target.hosts.len(), 1);
    assert_eq!(target.hosts[0].host, "db");
    assert_eq!(target.hosts[0].port, None);
    assert_eq!(target.database, "queuebox");
    assert_eq!(target.username, "queuebox");
}

#[test]
fn host_and_port() {
    let target = with_url("jdbc:postgresql://db.internal:5433/app", CREDENTIALS)
        .database
        .target;
    assert_eq!(target.hosts[0].port, Some(5433));
    assert_eq!(target.database, "app");
}

#[test]
fn several_hosts() {
    let target = with_url("jdbc:postgresql://a:5432,b,c:5434/app", CREDENTIALS)
        .database
        .target;
    let hosts: Vec<(String, Option<u16>)> = target
        .hosts
        .iter()
        .map(|h| (h.host.clone(), h.port))
        .collect();
    assert_eq!(
        hosts,
        vec![
            ("a".into(), Some(5432)),
            ("b".into(), None),
            ("c".into(), Some(5434))
        ]
    );
}

#[test]
fn query_parameters_are_kept_in_order() {
    let target = with_url(
        "jdbc:postgresql://db/app?sslmode=require&application_name=qb",
        CREDENTIALS,
    )
    .database
    .target;
    assert_eq!(
        target.params,
        vec![
            ("sslmode".into(), "require".into()),
            ("application_name".into(), "qb".into())
        ]
    );
}

#[test]
fn postgres_url_with_credentials() {
    let settings = with_url("postgres://app:p%40ss@db:5432/app", "");
    assert_eq!(settings.database.target.username, "app");
    assert_eq!(settings.database.target.password.expose(), "p@ss");
    assert_eq!(settings.database.username, "app");
    let settings = with_url("postgresql://app:pw@db/app", "");
    assert_eq!(settings.database.target.hosts[0].host, "db");
}

#[test]
fn the_keys_override_the_url_credentials() {
    let settings = with_url(
        "postgres://app:urlpw@db/app",
        "  username: other\n  password: keypw\n",
    );
    assert_eq!(settings.database.target.username, "other");
    assert_eq!(settings.database.target.password.expose(), "keypw");
}

#[test]
fn the_keys_fill_in_what_the_url_lacks() {
    let settings = with_url("postgres://app@db/app", "  password: keypw\n");
    assert_eq!(settings.database.target.username, "app");
    assert_eq!(settings.database.target.password.expose(), "keypw");
}

#[test]
fn sqlserver_urls_keep_what_they_can() {
    let yaml = "database:\n  type: sqlserver\n  url: jdbc:sqlserver://db.internal:1433;databaseName=queuebox;encrypt=true\n  username: u\n  password: p\n";
    let target = load_yaml(yaml, &[]).unwrap().settings.database.target;
    assert_eq!(target.kind, DatabaseKind::Sqlserver);
    assert_eq!(target.hosts[0].host, "db.internal");
    assert_eq!(target.hosts[0].port, Some(1433));
    assert_eq!(target.database, "queuebox");
    assert_eq!(target.params, vec![("encrypt".into(), "true".into())]);
}

#[test]
fn malformed_urls_are_refused_with_the_key() {
    for (url, fragment) in [
        ("jdbc:postgresql://db", "names no database"),
        (
            "jdbc:postgresql://db:99999/q",
            "is not a number from 1 to 65535",
        ),
        ("jdbc:postgresql://u:p@db/q", "takes no user:password@"),
        ("jdbc:mysql://db/q", "must start with"),
    ] {
        let error =
            load_yaml(&format!("database:\n  url: \"{url}\"\n{CREDENTIALS}"), &[]).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("database.url (QUEUEBOX_DATABASE_URL): ") && text.contains(fragment),
            "{url}: {text}"
        );
    }
}

#[test]
fn the_url_password_is_masked_in_the_display_url() {
    let settings = with_url("postgres://app:hunter2@db/app", "");
    let shown = settings.database.target.display_url();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("app:***@db"), "{shown}");
}
