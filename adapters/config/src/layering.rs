//! Which sources make up the configuration, and how they merge.
//!
//! The file, when it exists, replaces the packaged default; without a file, any configuration
//! variable also turns the packaged default off. Variables then win key by key: blocks merge (keys
//! matched in any letter case), a list set by a variable replaces the file's list whole, because
//! merging lists element by element would silently mix two route tables.

use crate::env::{CONFIG_FILE_VAR, EnvLayer, env_layer};
use crate::error::{ConfigError, Problem};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The file read when neither `--config` nor `QUEUEBOX_CONFIG_FILE` names one.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/queuebox/queuebox.yml";

/// The configuration packaged with the binary.
pub const PACKAGED: &str = include_str!("../resources/queuebox.yml");

/// Where the base of the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// The YAML file at this path, with any variables on top.
    File(PathBuf),
    /// No file: the `QUEUEBOX_` variables alone.
    EnvOnly,
    /// The packaged default: no file and no variable.
    Packaged,
}

impl std::fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigOrigin::File(path) => write!(f, "file {}", path.display()),
            ConfigOrigin::EnvOnly => f.write_str("QUEUEBOX_ variables only, no file"),
            ConfigOrigin::Packaged => f.write_str("the packaged default"),
        }
    }
}

/// The merged tree and what the later stages need to know about it.
pub(crate) struct Layered {
    pub tree: Value,
    pub origin: ConfigOrigin,
    pub env: EnvLayer,
    /// Problems of the variables themselves (a gap in list indexes, a value clashing with keys);
    /// reported together with the problems of the values.
    pub problems: Vec<Problem>,
}

/// Picks the sources and merges them.
pub(crate) fn layer(
    env: &[(String, String)],
    flag_file: Option<&Path>,
) -> Result<Layered, ConfigError> {
    let named_by_var = env
        .iter()
        .rev()
        .find(|(name, _)| name == CONFIG_FILE_VAR)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    if let Some(flag) = flag_file
        && !flag.exists()
    {
        // The flag is an explicit request for this file; falling back to anything else would hide
        // a typo in a deployment script.
        return Err(ConfigError::new(vec![Problem::general(format!(
            "--config names {}, which does not exist",
            flag.display()
        ))]));
    }
    // `QUEUEBOX_CONFIG_FILE` only names the file; it is not a configuration variable, so a missing
    // file it names behaves like the missing default file (the image sets it to the default path).
    let file = flag_file
        .map(Path::to_path_buf)
        .or(named_by_var)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE));
    let env_layer = env_layer(env);
    let mut problems = env_layer.problems.clone();

    let (base, origin) = if file.exists() {
        let text = std::fs::read_to_string(&file).map_err(|error| {
            ConfigError::new(vec![Problem::general(format!(
                "cannot read configuration file {}: {error}",
                file.display()
            ))])
        })?;
        let tree = parse_yaml(&text, &file.display().to_string())?;
        (tree, ConfigOrigin::File(file.clone()))
    } else if env_layer.any {
        (Value::Object(Map::new()), ConfigOrigin::EnvOnly)
    } else {
        (
            parse_yaml(PACKAGED, "the packaged queuebox.yml")?,
            ConfigOrigin::Packaged,
        )
    };

    let mut tree = base;
    merge(&mut tree, env_layer.tree.clone());
    if tree.as_object().is_some_and(Map::is_empty) {
        return Err(no_source(&file));
    }
    problems.dedup();
    Ok(Layered {
        tree,
        origin,
        env: env_layer,
        problems,
    })
}

fn no_source(file: &Path) -> ConfigError {
    ConfigError::new(vec![Problem::general(format!(
        "no configuration found: (1) no QUEUEBOX_ variable sets a key, (2) the file {} is empty (name another with --config or {CONFIG_FILE_VAR}), (3) the packaged queuebox.yml is used only when no file exists and no QUEUEBOX_ variable is set",
        file.display()
    ))])
}

fn parse_yaml(text: &str, label: &str) -> Result<Value, ConfigError> {
    let value: Value = serde_yaml::from_str(text).map_err(|error| {
        ConfigError::new(vec![Problem::general(format!(
            "{label} is not valid YAML: {error}"
        ))])
    })?;
    match value {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) => Ok(value),
        _ => Err(ConfigError::new(vec![Problem::general(format!(
            "{label} must hold a block of keys at the top level"
        ))])),
    }
}

/// Lays `top` over `base`: blocks merge key by key (any letter case), anything else replaces.
pub(crate) fn merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(base_map), Value::Object(top_map)) => {
            for (key, top_value) in top_map {
                let existing = base_map
                    .keys()
                    .find(|k| k.eq_ignore_ascii_case(&key))
                    .cloned();
                match existing {
                    Some(existing) => {
                        if let Some(slot) = base_map.get_mut(&existing) {
                            merge(slot, top_value);
                        }
                    }
                    None => {
                        base_map.insert(key, top_value);
                    }
                }
            }
        }
        (slot, top) => *slot = top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_merge_and_lists_replace() {
        let mut base =
            json!({"outbox": {"batchSize": 1, "concurrency": 2}, "routes": [{"a": 1}, {"b": 2}]});
        merge(
            &mut base,
            json!({"outbox": {"batchsize": "5"}, "routes": [{"c": "3"}]}),
        );
        assert_eq!(
            base,
            json!({"outbox": {"batchSize": "5", "concurrency": 2}, "routes": [{"c": "3"}]})
        );
    }
}
