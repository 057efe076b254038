//! The credential header of a destination, prepared once at construction.

use crate::oauth2::TokenSource;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use queuebox_domain::headers::AUTHORIZATION;
use queuebox_domain::redact::Redactor;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::PublishError;
use reqwest::Client;

/// How a destination authenticates its requests.
#[derive(Debug)]
pub(crate) enum Authenticator {
    /// No credential.
    None,
    /// A header whose value never changes (basic, header).
    Fixed {
        /// The header name.
        name: String,
        /// The full header value.
        value: Secret,
        /// The configured secret the value is built from (the basic password, the header value),
        /// masked in failure reasons on its own as well.
        source: Secret,
    },
    /// `Authorization: Bearer <token>` from the client credentials grant.
    OAuth2(Box<TokenSource>),
}

/// The credential header one request carries.
pub(crate) struct AuthHeader {
    pub(crate) name: String,
    pub(crate) value: Secret,
    /// The bearer token sent, to invalidate it if the destination refuses it.
    pub(crate) token: Option<Secret>,
}

impl Authenticator {
    /// `Authorization: Basic base64(username:password)`.
    pub(crate) fn basic(username: &str, password: &Secret) -> Self {
        let encoded = STANDARD.encode(format!("{username}:{}", password.expose()));
        Authenticator::Fixed {
            name: AUTHORIZATION.to_owned(),
            value: Secret::new(format!("Basic {encoded}")),
            source: password.clone(),
        }
    }

    /// A fixed header.
    pub(crate) fn header(name: &str, value: &Secret) -> Self {
        Authenticator::Fixed {
            name: name.to_owned(),
            value: value.clone(),
            source: value.clone(),
        }
    }

    /// The header for the next request; for OAuth2 this may fetch a token.
    pub(crate) async fn header_for_request(
        &self,
        client: &Client,
        redactor: &Redactor,
    ) -> Result<Option<AuthHeader>, PublishError> {
        match self {
            Authenticator::None => Ok(None),
            Authenticator::Fixed { name, value, .. } => Ok(Some(AuthHeader {
                name: name.clone(),
                value: value.clone(),
                token: None,
            })),
            Authenticator::OAuth2(source) => {
                let token = source.token(client, redactor).await?;
                Ok(Some(AuthHeader {
                    name: AUTHORIZATION.to_owned(),
                    value: Secret::new(format!("Bearer {}", token.expose())),
                    token: Some(token),
                }))
            }
        }
    }

    /// True for OAuth2, where a 401 may mean an expired or revoked token worth replacing.
    pub(crate) fn refreshable(&self) -> bool {
        matches!(self, Authenticator::OAuth2(_))
    }

    /// Forgets a token the destination refused.
    pub(crate) async fn refused(&self, header: &AuthHeader) {
        if let (Authenticator::OAuth2(source), Some(token)) = (self, &header.token) {
            source.invalidate(token).await;
        }
    }

    /// A redactor that also masks this destination's configured secrets.
    pub(crate) fn redactor(&self, max_bytes: usize) -> Redactor {
        let redactor = Redactor::new(max_bytes);
        match self {
            Authenticator::None => redactor,
            Authenticator::Fixed { value, source, .. } => {
                let redactor = redactor
                    .with_secret(value.expose())
                    .with_secret(source.expose());
                // The base64 part of a basic header alone, in case a receiver echoes it.
                match value.expose().strip_prefix("Basic ") {
                    Some(encoded) => redactor.with_secret(encoded),
                    None => redactor,
                }
            }
            Authenticator::OAuth2(source) => redactor.with_secret(source.client_secret().expose()),
        }
    }
}
