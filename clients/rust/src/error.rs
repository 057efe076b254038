//! Error types of the worker and of handlers.

use std::fmt;

/// Why a worker could not be built or stopped running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting that cannot work, found when the worker is built.
    #[error("invalid inbox worker option: {0}")]
    Config(String),
    /// A mapped table or column name that fails the identifier rule.
    #[error(
        "invalid SQL identifier {name:?} for {what}: use letters, digits and underscores, starting with a letter or underscore, at most 63 characters"
    )]
    Identifier { what: &'static str, name: String },
}

/// The failure of a handler. Any `std::error::Error` converts into it, so `?` works in a handler.
///
/// It deliberately does not implement `std::error::Error` itself, which is what allows the blanket
/// conversion (the same trick `anyhow` uses).
pub struct HandlerError {
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl HandlerError {
    /// A failure from a plain message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            inner: message.to_string().into(),
        }
    }

    /// The underlying error, for a retry policy that decides by kind.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.inner.as_ref()
    }

    /// The underlying error as `E`, when it is one.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.inner.downcast_ref::<E>()
    }
}

impl<E> From<E> for HandlerError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        Self {
            inner: Box::new(error),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The whole chain: the outer text alone often hides the cause that an operator needs.
        write!(f, "{}", self.inner)?;
        let mut source = self.inner.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HandlerError({self})")
    }
}
