//! Redis Streams (`queuebox-redis`, behind the `redis` feature): the publisher of `redis`
//! destinations and the consumer-group client of `redis` sources, run by the application's
//! source driver.

use anyhow::Context as _;
use queuebox_config::{Destination, RedisDestination, RedisSource as RedisSourceConfig, Settings};
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::Publisher;
use queuebox_redis::{
    RedisPublisher, RedisPublisherOptions, RedisSource, RedisSourceOptions, Trim,
};
use std::sync::Arc;

/// The publisher of destination `name`. It connects on its first publish (a server that is down
/// at start only delays delivery; the rows wait under the retry rules).
///
/// # Errors
/// `url`, the stream template or a setting is refused.
pub async fn publisher(
    settings: &Settings,
    name: &str,
    destination: &Destination,
    redis: &RedisDestination,
) -> anyhow::Result<Arc<dyn Publisher>> {
    let mut options = RedisPublisherOptions::new(
        name,
        Secret::new(redis.url.expose().to_owned()),
        redis.stream.clone(),
    );
    options.stream_from = redis.stream_from;
    options.trim = redis.max_len.map(|max| {
        if redis.max_len_approximate {
            Trim::Approximate(u64::from(max))
        } else {
            Trim::Exact(u64::from(max))
        }
    });
    options.timeout = redis.timeout;
    options.headers = destination
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    options.max_reason_bytes = settings.http.max_error_body_bytes;
    let publisher = RedisPublisher::new(options).with_context(|| format!("destinations.{name}"))?;
    Ok(Arc::new(publisher))
}

/// This process's consumer name when the source sets none: the host name, so each machine (or
/// pod) of a deployment is its own consumer of the group.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "queuebox".to_owned())
}

/// The client of source `name`: a consumer of its stream's group, run by the source driver (store,
/// ack after commit, hand-back, reconnect, health `redis.<name>`). It connects when the workers
/// start.
///
/// # Errors
/// `url` or a setting is refused.
pub fn client(name: &str, redis: &RedisSourceConfig) -> anyhow::Result<RedisSource> {
    let mut options = RedisSourceOptions::new(
        name,
        Secret::new(redis.url.expose().to_owned()),
        redis.stream.clone(),
        redis.group.clone(),
        redis.consumer.clone().unwrap_or_else(host_name),
    );
    options.batch_size = redis.batch_size;
    options.block = redis.block;
    options.claim_idle = redis.claim_idle;
    options.max_deliveries = redis.max_deliveries;
    options.dead_letter_stream = redis.dead_letter_stream.clone();
    RedisSource::new(options).with_context(|| format!("sources.{name}"))
}
