//! `${NAME}` and `${NAME:-fallback}` in configuration values.
//!
//! Names resolve against the environment the caller hands to the loader, never against the live
//! process, so a test controls every value. A fallback applies when the variable is unset or empty,
//! as in a POSIX shell, because an empty secret is never what the fallback's author meant.

use std::collections::HashMap;
use thiserror::Error;

/// Why a value's placeholders cannot be filled.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PlaceholderError {
    /// `${NAME}` with `NAME` unset and no fallback.
    #[error("placeholder ${{{0}}} has no value: set the variable {0} or write ${{{0}:-fallback}}")]
    Unset(String),
    /// `${` with no closing `}`.
    #[error("`${{` without a closing `}}`")]
    Unclosed,
    /// `${}` or a name that is not a variable name.
    #[error("`${{{0}}}` does not name a variable")]
    BadName(String),
}

/// A value with its placeholders filled, and the variables it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub text: String,
    pub used: Vec<String>,
}

/// Fills every `${...}` of `text` from `env`.
pub fn resolve(text: &str, env: &HashMap<String, String>) -> Result<Resolved, PlaceholderError> {
    let mut out = String::with_capacity(text.len());
    let mut used = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let inner_and_rest = &rest[start + 2..];
        let Some(end) = inner_and_rest.find('}') else {
            return Err(PlaceholderError::Unclosed);
        };
        let inner = &inner_and_rest[..end];
        let (name, fallback) = match inner.split_once(":-") {
            Some((name, fallback)) => (name, Some(fallback)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(PlaceholderError::BadName(inner.to_owned()));
        }
        used.push(name.to_owned());
        match (env.get(name).filter(|v| !v.is_empty()), fallback) {
            (Some(value), _) => out.push_str(value),
            (None, Some(fallback)) => out.push_str(fallback),
            // A set-but-empty variable with no fallback is still a value.
            (None, None) if env.contains_key(name) => {}
            (None, None) => return Err(PlaceholderError::Unset(name.to_owned())),
        }
        rest = &inner_and_rest[end + 1..];
    }
    out.push_str(rest);
    Ok(Resolved { text: out, used })
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn fills_set_variables_and_fallbacks() {
        let env = env(&[("A", "1"), ("EMPTY", "")]);
        assert_eq!(resolve("x${A}y", &env).unwrap().text, "x1y");
        assert_eq!(resolve("${B:-two}", &env).unwrap().text, "two");
        assert_eq!(resolve("${EMPTY:-fb}", &env).unwrap().text, "fb");
        assert_eq!(resolve("${EMPTY}", &env).unwrap().text, "");
        assert_eq!(resolve("${B:-}", &env).unwrap().text, "");
        assert_eq!(
            resolve("no placeholder $A", &env).unwrap().text,
            "no placeholder $A"
        );
        assert_eq!(resolve("${A}${B:-b}", &env).unwrap().used, vec!["A", "B"]);
    }

    #[test]
    fn errors() {
        let env = env(&[]);
        assert_eq!(
            resolve("${MISSING}", &env),
            Err(PlaceholderError::Unset("MISSING".into()))
        );
        assert_eq!(resolve("${A", &env), Err(PlaceholderError::Unclosed));
        assert!(matches!(
            resolve("${}", &env),
            Err(PlaceholderError::BadName(_))
        ));
    }
}
