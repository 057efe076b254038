//! The configuration loader: `YAML file NUL variables`, the variables one `NAME=value` per line.
//!
//! Holds: loading never panics; a refusal names at least one problem; an accepted configuration
//! prints (`check-config`) without a configured secret in the output.

use crate::split::{parts, text};
use queuebox_config::LoadRequest;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The file the YAML part is written to: one per process, in the temporary directory.
fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        std::env::temp_dir().join(format!("queuebox-fuzz-config-{}.yml", std::process::id()))
    })
}

/// The target body.
pub fn config(data: &[u8]) {
    let [yaml, variables] = parts::<2>(data);
    if std::fs::write(file(), yaml).is_err() {
        return;
    }
    let env: Vec<(String, String)> = text(variables)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let request = LoadRequest {
        env,
        config_file: Some(file().clone()),
    };
    match queuebox_config::load(&request) {
        Ok(loaded) => {
            let printed = queuebox_config::render_effective(&loaded.settings);
            let tree: serde_json::Value = match serde_yaml_like(&printed) {
                Some(tree) => tree,
                None => panic!("check-config printed something that is not YAML:\n{printed}"),
            };
            let password = &loaded.settings.database.password;
            let shown = tree.pointer("/database/password").and_then(|v| v.as_str());
            assert!(
                password.is_empty() || shown == Some(password.mask()),
                "check-config printed the database password as {shown:?}"
            );
        }
        Err(error) => assert!(!error.to_string().trim().is_empty(), "an empty refusal"),
    }
}

/// The printed configuration read back as a tree.
fn serde_yaml_like(printed: &str) -> Option<serde_json::Value> {
    serde_yaml::from_str(printed).ok()
}
