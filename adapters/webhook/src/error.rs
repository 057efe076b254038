//! The errors of building an HTTP destination. They stop the start, so they name the destination,
//! the field and the fix; they never print a credential (a user info part of a URL is masked).

use std::fmt;
use std::net::IpAddr;
use thiserror::Error;

/// What is wrong with a configured URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlProblem {
    /// The text does not parse as a URL.
    Unparsable(String),
    /// The scheme is not `http` or `https`, or the URL is not absolute.
    NotHttp,
    /// The URL has no host.
    NoHost,
    /// The URL carries a user name or a password.
    UserInfo,
    /// The path holds a `.` or `..` segment.
    DotSegment,
    /// A base URL carries a query or a fragment, which the appended path would break.
    QueryOrFragment,
}

impl fmt::Display for UrlProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlProblem::Unparsable(why) => write!(f, "it is not a URL ({why})"),
            UrlProblem::NotHttp => f.write_str("it must be an absolute http:// or https:// URL"),
            UrlProblem::NoHost => f.write_str("it has no host"),
            UrlProblem::UserInfo => {
                f.write_str("it carries a user name or password; use the auth block instead")
            }
            UrlProblem::DotSegment => f.write_str("its path holds a `.` or `..` segment"),
            UrlProblem::QueryOrFragment => {
                f.write_str("a base URL must not carry a query or a fragment")
            }
        }
    }
}

/// Why an HTTP destination cannot be built.
#[derive(Debug, Error)]
pub enum WebhookError {
    /// A URL or path is refused.
    #[error("destination `{destination}`: {field} `{url}` is refused: {problem}")]
    InvalidUrl {
        /// The destination name.
        destination: String,
        /// `baseUrl`, `path` or `auth.tokenUrl`.
        field: &'static str,
        /// The URL with any user info masked.
        url: String,
        /// What is wrong.
        problem: UrlProblem,
    },
    /// With `http.blockPrivateAddresses`, a host resolves to a private address.
    #[error(
        "destination `{destination}`: {field} host `{host}` resolves to {address}, a {class} address, \
         and http.blockPrivateAddresses is on"
    )]
    PrivateAddress {
        /// The destination name.
        destination: String,
        /// `baseUrl` or `auth.tokenUrl`.
        field: &'static str,
        /// The host as written.
        host: String,
        /// The refused address.
        address: IpAddr,
        /// `loopback`, `private`, ...
        class: &'static str,
    },
    /// A static header, the auth header or an OAuth2 parameter is not usable.
    #[error("destination `{destination}`: {what}")]
    InvalidSetting {
        /// The destination name.
        destination: String,
        /// What is wrong (never a secret value).
        what: String,
    },
    /// The HTTP client could not be built (TLS setup).
    #[error("destination `{destination}`: the HTTP client could not be built: {reason}")]
    Client {
        /// The destination name.
        destination: String,
        /// Why.
        reason: String,
    },
}

impl WebhookError {
    /// For a refused URL, the setting at fault under the destination (`baseUrl`, `path` or
    /// `auth.tokenUrl`) and what is wrong with it, so the caller can name the full configuration
    /// key and its variable as every other configuration error does.
    pub fn setting_problem(&self) -> Option<(&'static str, String)> {
        match self {
            WebhookError::InvalidUrl {
                field,
                url,
                problem,
                ..
            } => Some((field, format!("`{url}` is refused: {problem}"))),
            WebhookError::PrivateAddress {
                field,
                host,
                address,
                class,
                ..
            } => Some((
                field,
                format!(
                    "host `{host}` resolves to {address}, a {class} address, and http.blockPrivateAddresses is on"
                ),
            )),
            _ => None,
        }
    }
}
