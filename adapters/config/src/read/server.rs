//! `server.*`.

use super::port;
use crate::model::ServerSettings;
use crate::reader::{Block, Reader};
use serde_json::Value;

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> ServerSettings {
    let mut b = Block::open(r, value, "server");
    let http_port = port(r, &mut b, "httpPort").unwrap_or(8080);
    let management_port = port(r, &mut b, "managementPort");
    if management_port == Some(http_port) {
        r.problem(
            b.path_of("managementPort"),
            format!("must differ from server.httpPort, both are {http_port}"),
        );
    }
    b.finish(r);
    ServerSettings {
        http_port,
        management_port,
    }
}
