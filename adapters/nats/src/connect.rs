//! What publishers and sources share about reaching NATS: the `servers` list, the credentials,
//! the masking of both, and the client options.
//!
//! Once a client has connected, async-nats keeps it connected on its own: it reconnects (to any
//! server of the list) after a drop and re-creates its subscriptions, forever. So an adapter
//! connects once and keeps its client; only the first connection is ours to retry.

use crate::error::NatsError;
use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};
use queuebox_domain::redact::Redactor;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::PublishErrorKind;
use std::time::Duration;

/// The longest a single connection attempt may take, whatever the caller's budget.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The credentials the configuration accepts: a user with a password, or a token.
#[derive(Debug, Clone, Default)]
pub struct NatsCredentials {
    /// `username`.
    pub username: Option<String>,
    /// `password` (needs `username`).
    pub password: Option<Secret>,
    /// `token` (excludes `username`).
    pub token: Option<Secret>,
}

/// A parsed `servers` setting with its credentials and the masking they need.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    servers: Vec<ServerAddr>,
    /// `host:port` of each server, comma-separated: what reasons and logs show.
    pub(crate) shown: String,
    credentials: NatsCredentials,
    pub(crate) redactor: Redactor,
}

impl Endpoint {
    /// Parses `servers` (URLs separated by commas; `nats://` is assumed when a URL has no scheme).
    ///
    /// # Errors
    /// [`NatsError::InvalidServers`] naming `owner`; the reason never holds a secret.
    pub(crate) fn new(
        owner: &str,
        servers: &Secret,
        credentials: NatsCredentials,
        max_reason_bytes: usize,
    ) -> Result<Self, NatsError> {
        let raw = servers.expose();
        let mut redactor = Redactor::new(max_reason_bytes.max(64)).with_secret(raw);
        for secret in [&credentials.password, &credentials.token]
            .into_iter()
            .flatten()
        {
            redactor = redactor.with_secret(secret.expose());
        }
        let mut parsed = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            // Each URL alone is a secret too (its password), and so is its password.
            redactor = redactor.with_secret(part);
            let address: ServerAddr =
                part.parse()
                    .map_err(|error: std::io::Error| NatsError::InvalidServers {
                        owner: owner.to_owned(),
                        reason: redactor.redact(&error.to_string()),
                    })?;
            if let Some(password) = address.password().filter(|p| !p.is_empty()) {
                redactor = redactor.with_secret(password);
            }
            parsed.push(address);
        }
        if parsed.is_empty() {
            return Err(NatsError::InvalidServers {
                owner: owner.to_owned(),
                reason: "no server URL in it".to_owned(),
            });
        }
        let shown = parsed
            .iter()
            .map(|a| format!("{}:{}", a.host(), a.port()))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Self {
            servers: parsed,
            shown,
            credentials,
            redactor,
        })
    }

    /// Connects, within `budget` (at most [`MAX_CONNECT_TIMEOUT`] per attempt). The client then
    /// reconnects on its own for good.
    pub(crate) async fn connect(
        &self,
        client_name: &str,
        budget: Duration,
    ) -> Result<async_nats::Client, (PublishErrorKind, String)> {
        let mut options = ConnectOptions::new()
            .name(client_name)
            .connection_timeout(budget.clamp(Duration::from_millis(100), MAX_CONNECT_TIMEOUT))
            .max_reconnects(None::<usize>);
        if let Some(token) = &self.credentials.token {
            options = options.token(token.expose().to_owned());
        } else if let (Some(user), Some(password)) =
            (&self.credentials.username, &self.credentials.password)
        {
            options = options.user_and_password(user.clone(), password.expose().to_owned());
        }
        options
            .connect(self.servers.clone())
            .await
            .map_err(|error| {
                let kind = match error.kind() {
                    ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                        PublishErrorKind::Auth
                    }
                    ConnectErrorKind::ServerParse => PublishErrorKind::Other,
                    _ => PublishErrorKind::Unreachable,
                };
                let reason = self
                    .redactor
                    .redact(&format!("connecting to NATS at {}: {error}", self.shown));
                (kind, reason)
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_and_secrets_are_masked() {
        let credentials = NatsCredentials {
            username: None,
            password: None,
            token: Some(Secret::new("t0ken-xyz")),
        };
        let endpoint = Endpoint::new(
            "destinations.d",
            &Secret::new("nats://u:pw-123@n1:4222, n2:4223"),
            credentials,
            200,
        )
        .unwrap();
        assert_eq!(endpoint.shown, "n1:4222,n2:4223");
        let masked = endpoint
            .redactor
            .redact("refused pw-123 and t0ken-xyz at nats://u:pw-123@n1:4222");
        assert!(!masked.contains("pw-123"), "{masked}");
        assert!(!masked.contains("t0ken-xyz"), "{masked}");
        let error = Endpoint::new(
            "sources.s",
            &Secret::new(" , "),
            NatsCredentials::default(),
            200,
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with("sources.s: servers"),
            "{error}"
        );
    }
}
