//! Unknown keys load with a warning that names the key, where it came from and the nearest key.
#![allow(clippy::unwrap_used)]

mod common;
use common::{BASE, load_yaml};

#[test]
fn a_split_camel_case_variable_suggests_the_real_key() {
    let loaded = load_yaml(BASE, &[("QUEUEBOX_OUTBOX_POLL_INTERVAL_MS", "50")]).unwrap();
    assert_eq!(
        loaded.settings.outbox.poll_interval.as_millis(),
        100,
        "the value has no effect"
    );
    assert_eq!(
        loaded.warnings,
        vec!["unknown key outbox.poll.interval.ms (from QUEUEBOX_OUTBOX_POLL_INTERVAL_MS); did you mean outbox.pollIntervalMs?".to_owned()]
    );
}

#[test]
fn a_misspelt_file_key_suggests_the_real_key() {
    let loaded = load_yaml(&format!("{BASE}outbox:\n  batchSise: 5\n"), &[]).unwrap();
    assert_eq!(loaded.warnings.len(), 1);
    let warning = &loaded.warnings[0];
    assert!(
        warning.starts_with("unknown key outbox.batchSise (in "),
        "{warning}"
    );
    assert!(
        warning.contains("did you mean outbox.batchSize?"),
        "{warning}"
    );
}

#[test]
fn an_unknown_section_gets_no_wild_guess() {
    let loaded = load_yaml(&format!("{BASE}telemetry:\n  endpoint: x\n"), &[]).unwrap();
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].starts_with("unknown key telemetry.endpoint"),
        "{:?}",
        loaded.warnings
    );
    assert!(
        !loaded.warnings[0].contains("did you mean"),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn unknown_keys_inside_named_entries_are_reported() {
    let loaded = load_yaml(
        &format!("{BASE}destinations:\n  api:\n    baseUrl: https://a.example.com\n    timeOutMs: 5\n    tiemoutMs: 5\n"),
        &[],
    )
    .unwrap();
    // `timeOutMs` matches `timeoutMs` (any letter case); `tiemoutMs` is a typo.
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        loaded.warnings[0].contains("destinations.api.tiemoutMs"),
        "{:?}",
        loaded.warnings
    );
    assert!(
        loaded.warnings[0].contains("did you mean destinations.api.timeoutMs?"),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn config_file_variable_is_not_a_key() {
    let fixture = common::fixture(BASE);
    let loaded = queuebox_config::load(&queuebox_config::LoadRequest {
        env: common::env(&[("QUEUEBOX_CONFIG_FILE", fixture.file.to_str().unwrap())]),
        config_file: None,
    })
    .unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn a_variable_that_names_no_key_is_ignored_with_a_warning() {
    let loaded = load_yaml(BASE, &[("QUEUEBOX_OUTBOX_", "1")]).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("ignored variable QUEUEBOX_OUTBOX_")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn a_key_written_twice_in_different_case_is_refused() {
    let error = load_yaml(
        &format!("{BASE}outbox:\n  batchSize: 5\n  BATCHSIZE: 6\n"),
        &[],
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE): is set more than once"),
        "{error}"
    );
}
