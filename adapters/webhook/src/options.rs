//! What one HTTP destination is built from: the `destinations.<name>` block of type `http`, with
//! the `http.*` settings that apply to every HTTP destination.

use queuebox_domain::secret::Secret;
use std::time::Duration;

/// `path` when the configuration sets none.
pub const DEFAULT_PATH: &str = "/";
/// `timeoutMs` when the configuration sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// `http.maxErrorBodyBytes` when the configuration sets none.
pub const DEFAULT_MAX_ERROR_BODY_BYTES: usize = 2048;
/// Idle pooled connections kept per host when the caller does not size the pool.
pub const DEFAULT_MAX_IDLE_CONNECTIONS: usize = 32;

/// The settings of one HTTP destination.
#[derive(Debug, Clone)]
pub struct HttpDestinationOptions {
    /// The destination name (the key under `destinations`), used in errors.
    pub name: String,
    /// `baseUrl`: an absolute `http` or `https` URL with a host.
    pub base_url: String,
    /// `path`, appended to `base_url`.
    pub path: String,
    /// `timeoutMs`: the whole request, body included. The connect timeout is half of it.
    pub timeout: Duration,
    /// `headers`: static headers on every request, in configuration order.
    pub headers: Vec<(String, String)>,
    /// `auth`.
    pub auth: HttpAuth,
    /// `http.maxErrorBodyBytes`: how much of a failed answer's body a failure reason keeps.
    pub max_error_body_bytes: usize,
    /// `http.blockPrivateAddresses`: refuse URLs whose host resolves to a private address.
    pub block_private_addresses: bool,
    /// Idle keep-alive connections kept per host; set it to at least `outbox.concurrency` so a
    /// busy destination reuses connections instead of opening new ones.
    pub max_idle_connections: usize,
    /// `signing`: Standard Webhooks headers on every request.
    pub signing: Option<crate::signing::SigningOptions>,
}

impl HttpDestinationOptions {
    /// Options with every documented default and no auth.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            path: DEFAULT_PATH.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            headers: Vec::new(),
            auth: HttpAuth::None,
            max_error_body_bytes: DEFAULT_MAX_ERROR_BODY_BYTES,
            block_private_addresses: false,
            max_idle_connections: DEFAULT_MAX_IDLE_CONNECTIONS,
            signing: None,
        }
    }
}

/// The `auth` block of an HTTP destination.
#[derive(Debug, Clone, Default)]
pub enum HttpAuth {
    /// No credentials.
    #[default]
    None,
    /// HTTP Basic: `Authorization: Basic base64(username:password)`.
    Basic {
        /// `username`.
        username: String,
        /// `password`.
        password: Secret,
    },
    /// A fixed header: `headerName: headerValue`.
    Header {
        /// `headerName`, `Authorization` by default.
        name: String,
        /// `headerValue`.
        value: Secret,
    },
    /// OAuth2 client credentials: `Authorization: Bearer <token>`, the token cached.
    OAuth2(OAuth2Options),
}

/// The `oauth2` kind of destination auth.
#[derive(Debug, Clone)]
pub struct OAuth2Options {
    /// `clientId`.
    pub client_id: String,
    /// `clientSecret`.
    pub client_secret: Secret,
    /// `tokenUrl`: the same rules as `baseUrl` apply.
    pub token_url: String,
    /// `scope`, sent when set.
    pub scope: Option<String>,
    /// `extraParams`: more form fields of the token request, in order.
    pub extra_params: Vec<(String, String)>,
}
