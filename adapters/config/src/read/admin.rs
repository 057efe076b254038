//! `admin.*`.

use super::auth::read_inbound;
use super::{Floor, flag, millis, non_negative};
use crate::model::{AdminSettings, ConsoleSettings};
use crate::reader::{Block, Reader};
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> AdminSettings {
    let mut b = Block::open(r, value, "admin");
    let enabled = flag(r, &mut b, "enabled", false);
    let had_auth = b.has("auth");
    let auth = read_inbound(r, &mut b);
    let insecure = flag(r, &mut b, "insecure", false);
    // The admin routes run caller-supplied expressions and move rows: never open by accident.
    if enabled && !had_auth && !insecure {
        r.problem(
            b.path_of("enabled"),
            "the admin routes need admin.auth (bearer, api-key or hmac); set admin.insecure: true only for a local test",
        );
    }
    let console = read_console(r, &mut b);
    // The console moves rows and shows them: it lives behind the admin routes' credentials.
    if console.enabled && !enabled {
        r.problem(
            b.path_of("console"),
            "admin.console.enabled needs admin.enabled: true (the console uses the admin credentials)",
        );
    }
    let settings = AdminSettings {
        console,
        enabled,
        auth,
        insecure,
        max_transform_timeout: millis(r, &mut b, "maxTransformTimeoutMs", 1000, Floor::AboveZero),
        max_payload_bytes: usize::try_from(non_negative(r, &mut b, "maxPayloadBytes", 65_536))
            .unwrap_or(usize::MAX),
    };
    b.finish(r);
    settings
}

/// `admin.console.*`.
fn read_console(r: &mut Reader, parent: &mut Block<'_>) -> ConsoleSettings {
    let value = parent.get("console");
    let mut b = Block::open(r, value, &parent.path_of("console"));
    let enabled = flag(r, &mut b, "enabled", false);
    b.finish(r);
    ConsoleSettings { enabled }
}
