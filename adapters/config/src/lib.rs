//! Loads the QueueBox configuration and turns it into typed, validated [`Settings`].
//!
//! Three sources feed a load: the YAML file (`--config`, else `QUEUEBOX_CONFIG_FILE`, else
//! `/etc/queuebox/queuebox.yml`), the `QUEUEBOX_` variables, which win key by key, and the packaged
//! default, used only when there is neither a file nor a variable. Values may hold `${NAME}`
//! placeholders; credential fields may hold `file:` references. Every rule of the configuration
//! reference is checked here and every problem of a load is reported at once, each with its key path
//! and its variable name. Unknown keys are warnings with the nearest known key.
//!
//! The loader reads the environment only from [`LoadRequest::env`], never from the process, so its
//! tests are hermetic.
//!
//! This crate depends on `queuebox-domain` and `queuebox-ports` only. It must never depend on the
//! application crate or on another adapter: the binary hands the settings to them.
//!
//! The layering is written here on a JSON value tree rather than with the `config` crate, because
//! that crate's environment source cannot express the variable rules (`__` as a literal `_`, key
//! names matched in any letter case, a variable that replaces a whole list).

pub mod catalog;
mod cross;
mod env;
mod error;
mod jsonpath;
mod layering;
mod model;
mod placeholders;
mod read;
mod reader;
mod render;
mod secrets;
mod suggest;
mod url;

pub use env::{CONFIG_FILE_VAR, env_var_for};
pub use error::{ConfigError, Problem};
pub use jsonpath::check_definite;
pub use layering::{ConfigOrigin, DEFAULT_CONFIG_FILE, PACKAGED};
pub use model::*;
pub use render::render_effective;
pub use secrets::{SecretUrl, mask_url};

use reader::Reader;
use std::collections::HashMap;
use std::path::PathBuf;

/// What a load reads: the process environment and the `--config` flag.
#[derive(Debug, Clone, Default)]
pub struct LoadRequest {
    /// The whole environment, as (name, value) pairs; the source of `QUEUEBOX_` variables and of
    /// `${NAME}` placeholders.
    pub env: Vec<(String, String)>,
    /// The `--config` flag; it wins over `QUEUEBOX_CONFIG_FILE`.
    pub config_file: Option<PathBuf>,
}

/// A successful load.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub settings: Settings,
    /// Unknown keys and ignored variables; the binary logs each one.
    pub warnings: Vec<String>,
    pub origin: ConfigOrigin,
}

/// Loads, merges and validates the configuration.
///
/// # Errors
/// [`ConfigError`] with every problem found: no source, an unreadable file, invalid YAML, a value
/// that breaks a rule, a placeholder without a value or a `file:` secret that cannot be read.
pub fn load(request: &LoadRequest) -> Result<Loaded, ConfigError> {
    let layered = layering::layer(&request.env, request.config_file.as_deref())?;
    let env: HashMap<String, String> = request.env.iter().cloned().collect();
    let file_label = match &layered.origin {
        ConfigOrigin::File(path) => Some(path.display().to_string()),
        ConfigOrigin::Packaged => Some("the packaged queuebox.yml".to_owned()),
        ConfigOrigin::EnvOnly => None,
    };
    let mut reader = Reader::new(env, layered.env.paths, file_label);
    let settings = read::read_settings(&mut reader, &layered.tree);
    cross::check(&mut reader, &settings);
    let mut warnings = layered.env.warnings;
    warnings.extend(reader.warnings());
    let mut problems = layered.problems;
    problems.extend(reader.into_problems());
    if !problems.is_empty() {
        return Err(ConfigError::new(problems));
    }
    Ok(Loaded {
        settings,
        warnings,
        origin: layered.origin,
    })
}
