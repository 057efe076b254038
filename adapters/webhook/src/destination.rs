//! The HTTP destination: one endpoint, one pooled client, the [`Publisher`] port.

use crate::address::first_private_address;
use crate::auth::{AuthHeader, Authenticator};
use crate::error::WebhookError;
use crate::oauth2::{RESERVED_PARAMS, TokenSource};
use crate::options::{HttpAuth, HttpDestinationOptions};
use crate::response::{count_response, read_body_prefix, rejected, transport_failure};
use crate::signing::Signer;
use crate::tls::ensure_crypto_provider;
use crate::url_check::{check_absolute, check_path, join, mask_userinfo};
use async_trait::async_trait;
use queuebox_domain::headers::{HttpDelivery, http_delivery_headers, is_framing_header};
use queuebox_domain::redact::{Redactor, is_secret_key};
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Response, StatusCode, Url};
use std::time::Duration;

/// How failure reasons name the endpoint.
const DESTINATION: &str = "the destination";
/// How much of a successful answer's body is read so the connection can go back to the pool;
/// a longer body is dropped with its connection.
const DRAIN_LIMIT: usize = 64 * 1024;
/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One configured HTTP destination.
///
/// Build it once at start with [`HttpDestination::new`] and share it (`Arc<dyn Publisher>`):
/// every publish reuses the same keep-alive pool, and HTTP/2 where an `https` server offers it.
#[derive(Debug)]
pub struct HttpDestination {
    name: String,
    url: Url,
    timeout: Duration,
    static_headers: Vec<(String, String)>,
    auth: Authenticator,
    redactor: Redactor,
    client: Client,
    signer: Option<Signer>,
}

impl HttpDestination {
    /// Checks the options and builds the client.
    ///
    /// The checks: `baseUrl` and `tokenUrl` are absolute `http`/`https` URLs with a host, without
    /// user info or dot segments (a base URL also without query or fragment); `path` has no dot
    /// segment; the timeout is above zero; static and auth header names and values are valid and
    /// not framing headers; `extraParams` do not replace the grant's own fields. With
    /// `block_private_addresses`, the hosts are resolved and a private address is refused.
    ///
    /// # Errors
    /// [`WebhookError`] naming the destination, the field and the problem; never a secret.
    pub async fn new(options: HttpDestinationOptions) -> Result<Self, WebhookError> {
        let destination = options.name.clone();
        let invalid_url = |field: &'static str, raw: &str, problem| WebhookError::InvalidUrl {
            destination: destination.clone(),
            field,
            url: mask_userinfo(raw),
            problem,
        };
        let invalid = |what: String| WebhookError::InvalidSetting {
            destination: destination.clone(),
            what,
        };

        let base = check_absolute(&options.base_url, false)
            .map_err(|p| invalid_url("baseUrl", &options.base_url, p))?;
        check_path(&options.path).map_err(|p| invalid_url("path", &options.path, p))?;
        let url = join(&base, &options.path).map_err(|p| invalid_url("path", &options.path, p))?;
        if options.timeout.is_zero() {
            return Err(invalid("timeoutMs must be above 0".to_owned()));
        }
        for (name, value) in &options.headers {
            check_header(name, value).map_err(|why| invalid(format!("headers.{name}: {why}")))?;
        }

        let mut token_url = None;
        let auth = match &options.auth {
            HttpAuth::None => Authenticator::None,
            HttpAuth::Basic { username, password } => {
                if username.contains(':') {
                    return Err(invalid("auth.username must not contain `:`".to_owned()));
                }
                Authenticator::basic(username, password)
            }
            HttpAuth::Header { name, value } => {
                check_header(name, value.expose())
                    .map_err(|why| invalid(format!("auth.headerName `{name}`: {why}")))?;
                Authenticator::header(name, value)
            }
            HttpAuth::OAuth2(oauth) => {
                let parsed = check_absolute(&oauth.token_url, true)
                    .map_err(|p| invalid_url("auth.tokenUrl", &oauth.token_url, p))?;
                if let Some((key, _)) = oauth
                    .extra_params
                    .iter()
                    .find(|(key, _)| RESERVED_PARAMS.contains(&key.as_str()))
                {
                    return Err(invalid(format!(
                        "auth.extraParams.{key} would replace a field QueueBox sets itself"
                    )));
                }
                token_url = Some(parsed.clone());
                Authenticator::OAuth2(Box::new(TokenSource::new(
                    oauth.client_id.clone(),
                    oauth.client_secret.clone(),
                    parsed,
                    oauth.scope.clone(),
                    oauth.extra_params.clone(),
                    options.timeout,
                )))
            }
        };

        if options.block_private_addresses {
            let targets = std::iter::once(("baseUrl", &url))
                .chain(token_url.as_ref().map(|u| ("auth.tokenUrl", u)));
            for (field, target) in targets {
                if let Some((address, class)) = first_private_address(target).await {
                    return Err(WebhookError::PrivateAddress {
                        destination: destination.clone(),
                        field,
                        host: target.host_str().unwrap_or_default().to_owned(),
                        address,
                        class,
                    });
                }
            }
        }

        ensure_crypto_provider();
        let client = Client::builder()
            // A redirect could carry the credentials to another host; a 3xx fails the attempt.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(options.timeout)
            .connect_timeout(options.timeout / 2)
            .pool_max_idle_per_host(options.max_idle_connections.max(1))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            // Environment proxies would bypass the address rules and surprise operators; a
            // destination is reached directly.
            .no_proxy()
            .user_agent(concat!("queuebox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| WebhookError::Client {
                destination: destination.clone(),
                reason: e.to_string(),
            })?;

        let signer = options
            .signing
            .as_ref()
            .map(Signer::new)
            .transpose()
            .map_err(|bad| invalid(format!("signing.secrets: {bad}")))?;
        let redactor = auth.redactor(options.max_error_body_bytes);
        Ok(Self {
            name: options.name,
            url,
            timeout: options.timeout,
            static_headers: options.headers,
            auth,
            redactor,
            client,
            signer,
        })
    }

    /// The destination name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL every request goes to (`baseUrl` followed by `path`).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The redactor for failures of a request that carried `auth`.
    fn redactor_for(&self, auth: Option<&AuthHeader>) -> Redactor {
        match auth {
            Some(header) => {
                let redactor = self.redactor.clone().with_secret(header.value.expose());
                match &header.token {
                    Some(token) => redactor.with_secret(token.expose()),
                    None => redactor,
                }
            }
            None => self.redactor.clone(),
        }
    }

    /// The request headers of one message.
    fn header_map(
        &self,
        message: &OutboundMessage,
        auth: Option<&AuthHeader>,
    ) -> Result<HeaderMap, PublishError> {
        let merged = http_delivery_headers(&HttpDelivery {
            message_id: &message.id,
            topic: &message.topic,
            attempt: message.attempt,
            key: message.key.as_deref(),
            static_headers: &self.static_headers,
            auth: auth.map(|a| (a.name.as_str(), a.value.expose())),
            row_headers: &message.headers,
        });
        let mut map = HeaderMap::with_capacity(merged.len());
        for (name, value) in merged {
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                PublishError::new(
                    PublishErrorKind::InvalidMessage,
                    format!(
                        "row header name `{}` is not a valid HTTP header name",
                        self.redactor.redact(&name)
                    ),
                )
            })?;
            // Bytes, not str: a UTF-8 value travels as obs-text, as other HTTP stacks send it.
            let mut header_value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
                PublishError::new(
                    PublishErrorKind::InvalidMessage,
                    format!("the value of row header `{name}` holds a character HTTP forbids"),
                )
            })?;
            if is_secret_key(&name) {
                // Keeps the value out of HTTP/2 header compression tables and debug output.
                header_value.set_sensitive(true);
            }
            map.append(header_name, header_value);
        }
        Ok(map)
    }

    /// Sends one request; counts the answer (or its absence).
    async fn send(
        &self,
        message: &OutboundMessage,
        auth: Option<&AuthHeader>,
    ) -> Result<Response, PublishError> {
        let mut headers = self.header_map(message, auth)?;
        if let Some(signer) = &self.signer {
            signer.sign(&mut headers, &message.id, message.payload.as_bytes());
        }
        let sent = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .body(message.payload.clone())
            .send()
            .await;
        match sent {
            Ok(response) => {
                count_response(Some(response.status()));
                Ok(response)
            }
            Err(error) => {
                count_response(None);
                Err(transport_failure(
                    DESTINATION,
                    &self.url,
                    self.timeout,
                    &error,
                    &self.redactor_for(auth),
                ))
            }
        }
    }

    /// Success for a 2xx, a redacted failure otherwise.
    async fn finish(
        &self,
        response: Response,
        auth: Option<&AuthHeader>,
    ) -> Result<(), PublishError> {
        if response.status().is_success() {
            // Reading the body lets the connection go back to the pool. The delivery already
            // succeeded, so a body that breaks off changes nothing.
            let _ = read_body_prefix(response, DRAIN_LIMIT).await;
            return Ok(());
        }
        Err(rejected(
            DESTINATION,
            response,
            &self.redactor_for(auth),
            PublishErrorKind::Rejected,
        )
        .await)
    }
}

#[async_trait]
impl Publisher for HttpDestination {
    fn destination_type(&self) -> &'static str {
        "http"
    }

    /// Posts the payload. With OAuth2, a 401 drops the cached token and the request is sent once
    /// more with a fresh token within the same publish; a second 401 fails the attempt.
    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError> {
        let auth = self
            .auth
            .header_for_request(&self.client, &self.redactor)
            .await?;
        let response = self.send(message, auth.as_ref()).await?;
        if response.status() != StatusCode::UNAUTHORIZED || !self.auth.refreshable() {
            return self.finish(response, auth.as_ref()).await;
        }
        if let Some(header) = &auth {
            self.auth.refused(header).await;
        }
        let _ = read_body_prefix(response, DRAIN_LIMIT).await;
        let auth = self
            .auth
            .header_for_request(&self.client, &self.redactor)
            .await?;
        let response = self.send(message, auth.as_ref()).await?;
        self.finish(response, auth.as_ref()).await
    }
}

/// Why a configured header cannot be sent (the value is never quoted).
fn check_header(name: &str, value: &str) -> Result<(), String> {
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err("not a valid HTTP header name".to_owned());
    }
    if is_framing_header(name) {
        return Err("the HTTP client sets this header itself".to_owned());
    }
    if name.eq_ignore_ascii_case(queuebox_domain::headers::CONTENT_TYPE) {
        return Err("QueueBox always sends Content-Type: application/json; remove it".to_owned());
    }
    if HeaderValue::from_bytes(value.as_bytes()).is_err() {
        return Err("the value holds a character HTTP forbids".to_owned());
    }
    Ok(())
}
