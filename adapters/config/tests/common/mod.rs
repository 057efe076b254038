//! Helpers shared by the integration tests: every load is hermetic (its own temp dir and env).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use queuebox_config::{ConfigError, LoadRequest, Loaded, load};
use std::path::PathBuf;
use tempfile::TempDir;

/// The smallest file that loads.
pub const BASE: &str =
    "database:\n  url: jdbc:postgresql://db:5432/queuebox\n  username: queuebox\n  password: pw\n";

pub fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A temp dir holding `queuebox.yml` with `yaml`.
pub struct Fixture {
    pub dir: TempDir,
    pub file: PathBuf,
}

pub fn fixture(yaml: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queuebox.yml");
    std::fs::write(&file, yaml).unwrap();
    Fixture { dir, file }
}

/// Loads `yaml` as the `--config` file with `env`.
pub fn load_yaml(yaml: &str, env_pairs: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
    let fixture = fixture(yaml);
    load(&LoadRequest {
        env: env(env_pairs),
        config_file: Some(fixture.file.clone()),
    })
}

/// Loads `BASE` plus `extra`, expecting success.
pub fn ok(extra: &str) -> Loaded {
    match load_yaml(&format!("{BASE}{extra}"), &[]) {
        Ok(loaded) => loaded,
        Err(error) => panic!("expected the configuration to load:\n{error}"),
    }
}

/// Loads `BASE` plus `extra`, expecting failure; returns the problem lines.
pub fn problems(extra: &str) -> Vec<String> {
    problems_of(&format!("{BASE}{extra}"), &[])
}

pub fn problems_of(yaml: &str, env_pairs: &[(&str, &str)]) -> Vec<String> {
    match load_yaml(yaml, env_pairs) {
        Ok(loaded) => panic!("expected a failed load, got {:?}", loaded.settings),
        Err(error) => error.lines(),
    }
}

/// Asserts that loading `BASE` + `extra` fails with a line that names `path`, its variable and
/// holds `fragment`.
pub fn assert_refused(extra: &str, path: &str, variable: &str, fragment: &str) {
    let lines = problems(extra);
    let prefix = format!("{path} ({variable}): ");
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with(&prefix) && line.contains(fragment)),
        "expected a line starting with `{prefix}` holding `{fragment}`, got:\n{}",
        lines.join("\n")
    );
}
