//! `server.*`.

use super::{Floor, millis, port};
use crate::catalog::Doc;
use crate::model::ServerSettings;
use crate::reader::{Block, Reader};
use serde_json::Value;

/// `server.requestReadTimeoutMs` when unset: a legitimate client sends a request's head, and then
/// its body, well within 30 s; a client that trickles bytes to hold a connection (slowloris) is cut
/// off then.
const DEFAULT_REQUEST_READ_TIMEOUT_MS: u64 = 30_000;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> ServerSettings {
    let mut b = Block::open(r, value, "server");
    r.describe(&b.path_of("httpPort"), Doc::default().default_value(8080));
    let http_port = port(r, &mut b, "httpPort").unwrap_or(8080);
    let management_port = port(r, &mut b, "managementPort");
    if management_port == Some(http_port) {
        r.problem(
            b.path_of("managementPort"),
            format!("must differ from server.httpPort, both are {http_port}"),
        );
    }
    let request_read_timeout = millis(
        r,
        &mut b,
        "requestReadTimeoutMs",
        DEFAULT_REQUEST_READ_TIMEOUT_MS,
        Floor::AtLeast(100),
    );
    b.finish(r);
    ServerSettings {
        http_port,
        management_port,
        request_read_timeout,
    }
}
