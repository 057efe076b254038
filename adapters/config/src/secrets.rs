//! `file:` references of credential fields, and URLs that may carry a password.

use serde::{Serialize, Serializer};
use std::fmt;

/// The prefix that makes a credential field read a file.
pub const FILE_PREFIX: &str = "file:";

/// Reads the credential of a `file:` reference: the whole file, minus one trailing newline (a file
/// written by `echo` or a secret manager ends with one, and it is never part of the credential).
///
/// # Errors
/// The message of the failed read, naming the file.
pub fn read_secret_file(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("`file:` names no file".to_owned());
    }
    let mut text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read secret file {path}: {error}"))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// A URL, or a comma-separated list of URLs, that may hold a user's password.
///
/// `Debug`, `Display` and serialization print it with every password replaced by `***`, so a log
/// line keeps the host and port an operator needs and loses the credential.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL with its password, for the one place that connects.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with every password masked.
    pub fn masked(&self) -> String {
        mask_url(&self.0)
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUrl({})", self.masked())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl Serialize for SecretUrl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.masked())
    }
}

/// Masks the password of each URL in `text` (`scheme://user:password@host`), and the value of a
/// `password` parameter (`?password=x`, `;password=x`, as JDBC allows).
pub fn mask_url(text: &str) -> String {
    text.split(',').map(mask_one).collect::<Vec<_>>().join(",")
}

fn mask_one(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = out[authority_start..]
            .find(['/', '?', '#', ';'])
            .map_or(out.len(), |i| authority_start + i);
        if let Some(at) = out[authority_start..authority_end].rfind('@') {
            let userinfo = &out[authority_start..authority_start + at];
            if let Some(colon) = userinfo.find(':') {
                let password_start = authority_start + colon + 1;
                let password_end = authority_start + at;
                out.replace_range(password_start..password_end, "***");
            }
        }
    }
    mask_password_params(&out)
}

fn mask_password_params(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    loop {
        let Some(pos) = rest.find(['?', '&', ';']) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..=pos]);
        rest = &rest[pos + 1..];
        let end = rest.find(['&', ';', '#']).unwrap_or(rest.len());
        let pair = &rest[..end];
        match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                out.push_str(key);
                out.push_str("=***");
            }
            _ => out.push_str(pair),
        }
        rest = &rest[end..];
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn masks_user_info_passwords() {
        assert_eq!(
            mask_url("amqp://guest:guest@rabbitmq:5672/vhost"),
            "amqp://guest:***@rabbitmq:5672/vhost"
        );
        assert_eq!(mask_url("amqp://rabbitmq:5672"), "amqp://rabbitmq:5672");
        assert_eq!(
            mask_url("nats://a:b@n1:4222,nats://n2:4222"),
            "nats://a:***@n1:4222,nats://n2:4222"
        );
    }

    #[test]
    fn masks_password_parameters() {
        assert_eq!(
            mask_url("jdbc:postgresql://db/q?user=u&password=p&ssl=true"),
            "jdbc:postgresql://db/q?user=u&password=***&ssl=true"
        );
        assert_eq!(
            mask_url("jdbc:sqlserver://db:1433;databaseName=q;password=p"),
            "jdbc:sqlserver://db:1433;databaseName=q;password=***"
        );
    }

    #[test]
    fn reads_a_file_without_its_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, "hunter2\n").unwrap();
        assert_eq!(read_secret_file(path.to_str().unwrap()).unwrap(), "hunter2");
        std::fs::write(&path, "a\nb\r\n").unwrap();
        assert_eq!(read_secret_file(path.to_str().unwrap()).unwrap(), "a\nb");
        assert!(read_secret_file("/definitely/missing").is_err());
    }
}
