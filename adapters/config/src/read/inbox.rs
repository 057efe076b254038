//! `inbox.*` and `inbox.relay.*`.

use super::{Floor, flag, millis, positive, text_or};
use crate::catalog::Doc;
use crate::model::{InboxSettings, RelaySettings};
use crate::reader::{Block, Reader};
use serde_json::Value;

pub(super) fn read(
    r: &mut Reader,
    value: Option<&Value>,
    outbox_max_attempts: u32,
) -> InboxSettings {
    let mut b = Block::open(r, value, "inbox");
    let base_path = text_or(r, &mut b, "basePath", "/inbox");
    if !base_path.starts_with('/') {
        r.problem(
            b.path_of("basePath"),
            format!("must start with `/`, got `{base_path}`"),
        );
    }
    let max_body_bytes =
        usize::try_from(positive(r, &mut b, "maxBodyBytes", 1_048_576)).unwrap_or(usize::MAX);
    let relay_value = b.get("relay");
    let mut relay = Block::open(r, relay_value, &b.path_of("relay"));
    // The relay retries as often as the outbox unless told otherwise.
    r.describe(
        &relay.path_of("maxAttempts"),
        Doc::default().default_text("`outbox.maxAttempts`"),
    );
    let relay_settings = RelaySettings {
        enabled: flag(r, &mut relay, "enabled", true),
        poll_interval: millis(r, &mut relay, "pollIntervalMs", 100, Floor::AboveZero),
        batch_size: positive(r, &mut relay, "batchSize", 100),
        claim_timeout: millis(r, &mut relay, "claimTimeoutMs", 300_000, Floor::AboveZero),
        pending_gauge_interval: millis(r, &mut relay, "pendingGaugeIntervalMs", 5000, Floor::Zero),
        max_attempts: super::opt_positive(r, &mut relay, "maxAttempts")
            .unwrap_or(outbox_max_attempts),
    };
    relay.finish(r);
    b.finish(r);
    InboxSettings {
        base_path,
        max_body_bytes,
        relay: relay_settings,
    }
}
