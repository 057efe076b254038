//! The error of a failed load: every problem found, each tied to the key it concerns.

use crate::env::env_var_for;
use std::fmt;
use thiserror::Error;

/// One reason the configuration cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key path, for example `outbox.batchSize` or `routes[0].destination`; `None` for a
    /// problem that concerns no single key (a missing source, a file that is not YAML).
    pub path: Option<String>,
    /// What is wrong, in words an operator can act on.
    pub message: String,
}

impl Problem {
    /// A problem of one key.
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: Some(path.into()),
            message: message.into(),
        }
    }

    /// A problem that concerns the configuration as a whole.
    pub fn general(message: impl Into<String>) -> Self {
        Self {
            path: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    /// `path (QUEUEBOX_VARIABLE): message`, so an operator can fix either the file or the variable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{path} ({}): {}", env_var_for(path), self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Every problem of one load. The process must not start with any of them.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{}", render(.problems))]
pub struct ConfigError {
    problems: Vec<Problem>,
}

impl ConfigError {
    /// Wraps the problems of a load (at least one).
    pub fn new(problems: Vec<Problem>) -> Self {
        Self { problems }
    }

    /// The problems, in the order the loader found them.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Each problem as the line that `Display` prints for it.
    pub fn lines(&self) -> Vec<String> {
        self.problems.iter().map(ToString::to_string).collect()
    }
}

fn render(problems: &[Problem]) -> String {
    let mut out = match problems.len() {
        1 => "invalid configuration (1 problem):".to_owned(),
        n => format!("invalid configuration ({n} problems):"),
    };
    for problem in problems {
        out.push_str("\n  ");
        out.push_str(&problem.to_string());
    }
    out
}
