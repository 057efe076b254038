//! The single error type of the engine: a JSONata error code (as the reference
//! implementation raises it), an optional character position in the expression,
//! and a human readable message.

use std::fmt;

/// An error raised while compiling or evaluating an expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    /// JSONata error code, e.g. `S0201` (syntax), `T2001` (type), `D3030` (dynamic), `U1001` (limit).
    pub code: &'static str,
    /// Character offset in the expression source, when known.
    pub position: Option<usize>,
    /// The token involved, when known.
    pub token: Option<String>,
    /// Explanation for humans.
    pub message: String,
}

impl Error {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Error {
            code,
            position: None,
            token: None,
            message: message.into(),
        }
    }

    pub(crate) fn at(code: &'static str, position: usize, message: impl Into<String>) -> Self {
        Error {
            code,
            position: Some(position),
            token: None,
            message: message.into(),
        }
    }

    pub(crate) fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    pub(crate) fn pos_if_none(mut self, position: usize) -> Self {
        if self.position.is_none() {
            self.position = Some(position);
        }
        self
    }

    /// True when the error is one of the resource limits (time, depth, size)
    /// rather than a problem with the expression or data.
    pub fn is_limit(&self) -> bool {
        self.code.starts_with('U')
    }

    /// True when the error is the time limit ([`crate::Limits::timeout`]); the depth and stack
    /// limits share its `U1001` code.
    pub fn is_timeout(&self) -> bool {
        self.code == "U1001" && self.message.starts_with(crate::limits::TIMEOUT_MESSAGE)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(p) => write!(f, "{} at position {}: {}", self.code, p, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for Error {}

pub(crate) type Result<T> = std::result::Result<T, Error>;
