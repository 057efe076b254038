//! A credential value that never prints itself.

use std::fmt;

/// A credential: a password, a token, a key or a client secret.
///
/// `Debug` and `Display` print `Secret(***)`, or `Secret(empty)` when the value is empty, so a log line
/// or an error that formats a configuration object cannot leak the value. Read the value with
/// [`Secret::expose`] at the single place that needs it (a connection, a signature check).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The raw value. Call it only where the credential is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when no credential is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The mask that stands for this value in any output.
    pub fn mask(&self) -> &'static str {
        if self.0.is_empty() {
            "Secret(empty)"
        } else {
            "Secret(***)"
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mask())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mask())
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_mask_the_value() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{secret}"), "Secret(***)");
        assert_eq!(secret.expose(), "hunter2");
    }

    #[test]
    fn an_empty_value_says_so() {
        let secret = Secret::default();
        assert_eq!(format!("{secret:?}"), "Secret(empty)");
        assert!(secret.is_empty());
    }

    #[test]
    fn a_struct_holding_a_secret_never_prints_it() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Holder {
            password: Secret,
        }
        let printed = format!(
            "{:?}",
            Holder {
                password: Secret::new("s3cr3t")
            }
        );
        assert!(!printed.contains("s3cr3t"), "{printed}");
    }
}
