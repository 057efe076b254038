//! OAuth2 client credentials: fetch a bearer token, cache it, fetch again when it nears its end or
//! the destination refuses it.
//!
//! One token serves every concurrent publish of a destination. The cache sits behind an async
//! mutex held across the fetch, so a burst of publishes with an expired token causes one token
//! request, not one per publish. Neither the client secret nor a token is ever logged or put into
//! a failure reason: both are masked by the redactor, and `Debug` shows neither.

use crate::response::{rejected, transport_failure};
use queuebox_domain::redact::Redactor;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use reqwest::{Client, Url};
use serde::Deserialize;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The lifetime assumed when the token endpoint sends no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// The longest head start of a refresh before the token expires.
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// Form fields QueueBox sets itself; `extraParams` may not replace them.
pub(crate) const RESERVED_PARAMS: [&str; 4] = ["grant_type", "client_id", "client_secret", "scope"];

/// How failure reasons name the token endpoint.
const TOKEN_ENDPOINT: &str = "the OAuth2 token endpoint";

/// A token failure is an auth failure, whatever broke.
fn as_auth(mut error: PublishError) -> PublishError {
    error.kind = PublishErrorKind::Auth;
    error
}

/// A token and the instant after which it is not used any more.
struct Cached {
    token: Secret,
    refresh_at: Instant,
}

/// The token source of one destination.
pub(crate) struct TokenSource {
    client_id: String,
    client_secret: Secret,
    token_url: Url,
    scope: Option<String>,
    extra_params: Vec<(String, String)>,
    timeout: Duration,
    cache: Mutex<Option<Cached>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("token_url", &self.token_url.as_str())
            .finish_non_exhaustive()
    }
}

/// The fields of a token response QueueBox reads.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

impl TokenSource {
    pub(crate) fn new(
        client_id: String,
        client_secret: Secret,
        token_url: Url,
        scope: Option<String>,
        extra_params: Vec<(String, String)>,
        timeout: Duration,
    ) -> Self {
        Self {
            client_id,
            client_secret,
            token_url,
            scope,
            extra_params,
            timeout,
            cache: Mutex::new(None),
        }
    }

    /// The client secret, for the redactor.
    pub(crate) fn client_secret(&self) -> &Secret {
        &self.client_secret
    }

    /// A valid token: the cached one, or a new one from the token endpoint.
    pub(crate) async fn token(
        &self,
        client: &Client,
        redactor: &Redactor,
    ) -> Result<Secret, PublishError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref().filter(|c| Instant::now() < c.refresh_at) {
            return Ok(cached.token.clone());
        }
        let fetched = self.fetch(client, redactor).await?;
        let token = fetched.token.clone();
        *cache = Some(fetched);
        Ok(token)
    }

    /// Drops `stale` from the cache after the destination refused it. A token that another publish
    /// already replaced stays, so a burst of 401s does not trigger a burst of fetches.
    pub(crate) async fn invalidate(&self, stale: &Secret) {
        let mut cache = self.cache.lock().await;
        if cache.as_ref().is_some_and(|c| &c.token == stale) {
            *cache = None;
        }
    }

    async fn fetch(&self, client: &Client, redactor: &Redactor) -> Result<Cached, PublishError> {
        let redactor = redactor.clone().with_secret(self.client_secret.expose());
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "client_credentials"),
            ("client_id", &self.client_id),
            ("client_secret", self.client_secret.expose()),
        ];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        form.extend(
            self.extra_params
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );

        let started = Instant::now();
        let response = client
            .post(self.token_url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                transport_failure(TOKEN_ENDPOINT, &self.token_url, self.timeout, &e, &redactor)
            })
            .map_err(as_auth)?;
        if !response.status().is_success() {
            return Err(
                rejected(TOKEN_ENDPOINT, response, &redactor, PublishErrorKind::Auth).await,
            );
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| {
                transport_failure(TOKEN_ENDPOINT, &self.token_url, self.timeout, &e, &redactor)
            })
            .map_err(as_auth)?;
        let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
            // serde's message can quote the body; only its position is kept.
            PublishError::new(
                PublishErrorKind::Auth,
                format!(
                    "the OAuth2 token endpoint answered with no usable access_token (line {}, column {})",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        if parsed.access_token.is_empty() {
            return Err(PublishError::new(
                PublishErrorKind::Auth,
                "the OAuth2 token endpoint answered with an empty access_token",
            ));
        }
        let lifetime = parsed
            .expires_in
            .as_ref()
            .and_then(seconds)
            .unwrap_or(DEFAULT_LIFETIME);
        // Refresh ahead of the end by a tenth of the lifetime, at most 30 s, so a publish never
        // sends a token that expires on the way.
        let margin = (lifetime / 10).min(MAX_REFRESH_MARGIN);
        tracing::debug!(
            token_url = %self.token_url,
            lifetime_s = lifetime.as_secs(),
            "fetched an OAuth2 token"
        );
        Ok(Cached {
            token: Secret::new(parsed.access_token),
            refresh_at: started + lifetime.saturating_sub(margin),
        })
    }
}

/// `expires_in` as a number or a numeric string (some servers send `"3600"`).
fn seconds(value: &serde_json::Value) -> Option<Duration> {
    let secs = match value {
        serde_json::Value::Number(n) => n.as_f64()?,
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_in_forms() {
        assert_eq!(
            seconds(&serde_json::json!(3600)),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            seconds(&serde_json::json!("120")),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            seconds(&serde_json::json!(1.5)),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(seconds(&serde_json::json!(-1)), None);
        assert_eq!(seconds(&serde_json::json!(null)), None);
    }
}
