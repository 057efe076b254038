//! Which source wins: variables over the file, the file over the packaged default, the packaged
//! default only with neither; lists replaced whole, blocks merged key by key.
#![allow(clippy::unwrap_used)]

mod common;
use common::{BASE, env, fixture, load_yaml};
use queuebox_config::{ConfigOrigin, DestinationKind, LoadRequest, load};

fn missing_file_env() -> (tempfile::TempDir, (String, String)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.yml").to_str().unwrap().to_owned();
    (dir, ("QUEUEBOX_CONFIG_FILE".to_owned(), path))
}

#[test]
fn a_variable_wins_over_the_file() {
    let loaded = load_yaml(
        &format!("{BASE}outbox:\n  batchSize: 10\n  concurrency: 3\n"),
        &[("QUEUEBOX_OUTBOX_BATCHSIZE", "50")],
    )
    .unwrap();
    assert_eq!(loaded.settings.outbox.batch_size, 50);
    assert_eq!(loaded.settings.outbox.concurrency, 3);
    assert!(matches!(loaded.origin, ConfigOrigin::File(_)));
}

#[test]
fn the_file_replaces_the_packaged_default() {
    // The packaged default sets a local database; this file sets another and nothing merges.
    let loaded = load_yaml(
        "database:\n  url: jdbc:postgresql://elsewhere:6543/other\n  username: me\n  password: pw\n",
        &[],
    )
    .unwrap();
    assert_eq!(loaded.settings.database.target.hosts[0].host, "elsewhere");
    assert_eq!(loaded.settings.database.username, "me");
}

#[test]
fn a_file_without_a_database_does_not_borrow_the_packaged_one() {
    let error = load_yaml("server:\n  httpPort: 8081\n", &[]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("database.url (QUEUEBOX_DATABASE_URL): is required"),
        "{error}"
    );
}

#[test]
fn the_packaged_default_is_used_only_without_file_and_variables() {
    // No QUEUEBOX_ variable at all, and the default path does not exist on a test machine.
    if std::path::Path::new(queuebox_config::DEFAULT_CONFIG_FILE).exists() {
        return;
    }
    let loaded = load(&LoadRequest {
        env: env(&[("HOME", "/root")]),
        config_file: None,
    })
    .unwrap();
    assert_eq!(loaded.origin, ConfigOrigin::Packaged);
    assert_eq!(loaded.settings.database.target.hosts[0].host, "localhost");
    assert_eq!(loaded.settings.database.username, "queuebox");
    assert_eq!(loaded.settings.database.password.expose(), "queuebox");

    // One variable turns the packaged default off: the database keys are then missing.
    let error = load(&LoadRequest {
        env: env(&[("QUEUEBOX_SERVER_HTTPPORT", "8081")]),
        config_file: None,
    })
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("database.url (QUEUEBOX_DATABASE_URL): is required"),
        "{error}"
    );
}

#[test]
fn variables_alone_make_a_configuration() {
    let (_dir, file_var) = missing_file_env();
    let mut vars = env(&[
        ("QUEUEBOX_DATABASE_URL", "postgres://db/q"),
        ("QUEUEBOX_DATABASE_USERNAME", "u"),
        ("QUEUEBOX_DATABASE_PASSWORD", "p"),
    ]);
    vars.push(file_var);
    let loaded = load(&LoadRequest {
        env: vars,
        config_file: None,
    })
    .unwrap();
    assert_eq!(loaded.origin, ConfigOrigin::EnvOnly);
    assert!(loaded.settings.destinations.is_empty());
    assert!(loaded.settings.routes.is_empty());
}

#[test]
fn no_source_names_the_three_sources() {
    let fixture = fixture("# nothing here\n");
    let file_var = (
        "QUEUEBOX_CONFIG_FILE".to_owned(),
        fixture.file.to_str().unwrap().to_owned(),
    );
    let error = load(&LoadRequest {
        env: vec![file_var],
        config_file: None,
    })
    .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("no configuration found"), "{text}");
    assert!(text.contains("QUEUEBOX_ variable"), "{text}");
    assert!(text.contains("queuebox.yml is empty"), "{text}");
    assert!(text.contains("packaged queuebox.yml"), "{text}");
}

#[test]
fn config_file_variable_naming_a_missing_file_falls_back_like_the_default_path() {
    // QUEUEBOX_CONFIG_FILE is not a configuration variable: it does not turn the packaged
    // default off (the image sets it to the default path).
    let (_dir, file_var) = missing_file_env();
    let loaded = load(&LoadRequest {
        env: vec![file_var],
        config_file: None,
    })
    .unwrap();
    assert_eq!(loaded.origin, ConfigOrigin::Packaged);
    assert_eq!(loaded.origin.to_string(), "the packaged default");
}

#[test]
fn an_empty_file_without_variables_is_no_source() {
    let error = load_yaml("", &[]).unwrap_err();
    assert!(
        error.to_string().contains("no configuration found"),
        "{error}"
    );
}

#[test]
fn the_config_flag_wins_over_the_variable() {
    let chosen = fixture(&format!("{BASE}server:\n  httpPort: 1111\n"));
    let other = fixture(&format!("{BASE}server:\n  httpPort: 2222\n"));
    let mut vars = env(&[]);
    vars.push((
        "QUEUEBOX_CONFIG_FILE".into(),
        other.file.to_str().unwrap().into(),
    ));
    let loaded = load(&LoadRequest {
        env: vars.clone(),
        config_file: Some(chosen.file.clone()),
    })
    .unwrap();
    assert_eq!(loaded.settings.server.http_port, 1111);
    assert_eq!(loaded.origin, ConfigOrigin::File(chosen.file.clone()));
    let loaded = load(&LoadRequest {
        env: vars,
        config_file: None,
    })
    .unwrap();
    assert_eq!(loaded.settings.server.http_port, 2222);
}

#[test]
fn a_missing_config_flag_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let error = load(&LoadRequest {
        env: vec![],
        config_file: Some(dir.path().join("typo.yml")),
    })
    .unwrap_err();
    assert!(error.to_string().contains("typo.yml"), "{error}");
}

#[test]
fn a_variable_in_a_list_replaces_the_whole_list() {
    let yaml = format!(
        "{BASE}destinations:\n  a:\n    baseUrl: https://a.example.com\n  b:\n    baseUrl: https://b.example.com\nroutes:\n  - topicPattern: \"x.*\"\n    destination: a\n  - topicPattern: \"**\"\n    destination: b\n"
    );
    let loaded = load_yaml(
        &yaml,
        &[
            ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "y.*"),
            ("QUEUEBOX_ROUTES_0_DESTINATION", "b"),
        ],
    )
    .unwrap();
    assert_eq!(
        loaded.settings.routes.len(),
        1,
        "the file's second route is gone"
    );
    assert_eq!(loaded.settings.routes[0].topic_pattern, "y.*");
    assert_eq!(loaded.settings.routes[0].destination, "b");

    // Setting one key of an element leaves the element incomplete: the start fails.
    let error = load_yaml(&yaml, &[("QUEUEBOX_ROUTES_0_DESTINATION", "b")]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("routes[0].topicPattern (QUEUEBOX_ROUTES_0_TOPICPATTERN): is required"),
        "{error}"
    );
}

#[test]
fn a_variable_merges_into_a_map_key_by_key() {
    let yaml = format!(
        "{BASE}destinations:\n  orders:\n    baseUrl: https://a.example.com\n    path: /events\n    headers:\n      x-team: orders\n"
    );
    let loaded = load_yaml(
        &yaml,
        &[
            ("QUEUEBOX_DESTINATIONS_ORDERS_TIMEOUTMS", "5000"),
            ("QUEUEBOX_DESTINATIONS_ORDERS_HEADERS_XSOURCE", "qb"),
        ],
    )
    .unwrap();
    let destination = &loaded.settings.destinations["orders"];
    let DestinationKind::Http(http) = &destination.kind else {
        panic!("http")
    };
    assert_eq!(http.timeout.as_millis(), 5000);
    assert_eq!(http.path, "/events");
    assert_eq!(
        destination.headers.get("x-team").map(String::as_str),
        Some("orders")
    );
    assert_eq!(
        destination.headers.get("xsource").map(String::as_str),
        Some("qb")
    );
}

#[test]
fn a_variable_can_add_a_destination_next_to_the_file_ones() {
    let yaml = format!("{BASE}destinations:\n  a:\n    baseUrl: https://a.example.com\n");
    let loaded = load_yaml(
        &yaml,
        &[("QUEUEBOX_DESTINATIONS_B_BASEURL", "https://b.example.com")],
    )
    .unwrap();
    let names: Vec<&str> = loaded
        .settings
        .destinations
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn a_gap_in_list_indexes_is_an_error() {
    let error = load_yaml(BASE, &[("QUEUEBOX_ROUTES_1_TOPICPATTERN", "x")]).unwrap_err();
    assert!(
        error.to_string().contains("routes[1] (QUEUEBOX_ROUTES_1)"),
        "{error}"
    );
}

#[test]
fn variable_problems_and_value_problems_are_reported_together() {
    let error = load_yaml(
        &format!("{BASE}outbox:\n  batchSize: 0\n"),
        &[("QUEUEBOX_ROUTES_1_TOPICPATTERN", "x")],
    )
    .unwrap_err();
    let lines = error.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("routes[1] (QUEUEBOX_ROUTES_1)")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE)")),
        "{lines:?}"
    );
}
