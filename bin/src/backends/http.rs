//! HTTP, always built: the webhook publisher of `http` destinations (`queuebox-webhook`) and the
//! POST route of `http` sources (served by `queuebox-http`).

use super::source::StartedSource;
use anyhow::{Context as _, bail};
use queuebox_config::{Destination, HttpDestination, HttpSource, OutboundAuth, Settings};
use queuebox_http::InboxRoute;
use queuebox_ports::publish::Publisher;
use queuebox_webhook::{HttpAuth, HttpDestinationOptions, OAuth2Options};
use std::collections::HashMap;
use std::sync::Arc;

/// The publisher of destination `name`.
///
/// # Errors
/// The destination's URL or a static header is refused, or its client cannot be built.
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
    http: &HttpDestination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    let mut options = HttpDestinationOptions::new(name.to_owned(), http.base_url.clone());
    options.path = http.path.clone();
    options.timeout = http.timeout;
    options.headers = destination
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.auth = auth(http.auth.as_ref());
    options.signing = http
        .signing
        .as_ref()
        .map(|signing| queuebox_webhook::SigningOptions {
            secrets: signing.secrets.clone(),
        });
    options.max_error_body_bytes = settings.http.max_error_body_bytes;
    options.block_private_addresses = settings.http.block_private_addresses;
    // Every concurrent publish may hold one idle connection between requests.
    options.max_idle_connections = options
        .max_idle_connections
        .max(settings.outbox.concurrency as usize);
    let publisher = match queuebox_webhook::HttpDestination::new(options).await {
        Ok(publisher) => publisher,
        // A refused URL names its key and variable, as every other configuration error does.
        Err(error) => match error.setting_problem() {
            Some((field, problem)) => {
                let key = format!("destinations.{name}.{field}");
                bail!("{key} ({}): {problem}", queuebox_config::env_var_for(&key))
            }
            None => return Err(error).with_context(|| format!("destinations.{name}")),
        },
    };
    Ok(Arc::new(publisher))
}

fn auth(auth: Option<&OutboundAuth>) -> HttpAuth {
    match auth {
        None => HttpAuth::None,
        Some(OutboundAuth::Basic { username, password }) => HttpAuth::Basic {
            username: username.clone(),
            password: password.clone(),
        },
        Some(OutboundAuth::Header {
            header_name,
            header_value,
        }) => HttpAuth::Header {
            name: header_name.clone(),
            value: header_value.clone(),
        },
        Some(OutboundAuth::Oauth2 {
            client_id,
            client_secret,
            token_url,
            scope,
            extra_params,
        }) => HttpAuth::OAuth2(OAuth2Options {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            token_url: token_url.clone(),
            scope: scope.clone(),
            extra_params: extra_params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }),
    }
}

/// Source `name`: a POST route at `inbox.basePath` followed by its `path`, which the data port
/// serves once every part has started.
pub fn source(settings: &Settings, name: &str, http: &HttpSource) -> StartedSource {
    StartedSource::Route(InboxRoute {
        path: route_path(&settings.inbox.base_path, &http.path),
        source: name.to_owned(),
    })
}

/// `inbox.basePath` followed by the source's `path`, without a doubled `/` between them.
fn route_path(base_path: &str, path: &str) -> String {
    format!("{}{}", base_path.trim_end_matches('/'), path)
}

/// Refuses two sources that answer at the same path (the configuration loader refuses them
/// first, so this is a last guard: the second route would never be reached).
///
/// # Errors
/// The first path two routes share, naming both sources.
pub fn check_paths(routes: &[InboxRoute]) -> anyhow::Result<()> {
    let mut paths: HashMap<&str, &str> = HashMap::new();
    for route in routes {
        if let Some(other) = paths.insert(&route.path, &route.source) {
            bail!(
                "sources.{other} and sources.{} both answer at POST {}",
                route.source,
                route.path
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_joins_base_path_and_path_once() {
        assert_eq!(route_path("/inbox", "/stripe"), "/inbox/stripe");
        assert_eq!(route_path("/inbox/", "/stripe"), "/inbox/stripe");
        assert_eq!(route_path("/", "/stripe"), "/stripe");
    }

    #[test]
    fn two_sources_at_one_path_are_refused_naming_both() {
        let route = |source: &str, path: &str| InboxRoute {
            path: path.to_owned(),
            source: source.to_owned(),
        };
        assert!(check_paths(&[route("a", "/inbox/a"), route("b", "/inbox/b")]).is_ok());
        let error =
            check_paths(&[route("a", "/inbox/x"), route("b", "/inbox/x")]).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "sources.a and sources.b both answer at POST /inbox/x"
        );
    }
}
