//! What every route reads from a request the same way: its headers as name/value pairs and the
//! length it declares.

use salvo::http::header::CONTENT_LENGTH;
use salvo::prelude::Request;

/// The headers as `(name, value)` pairs in arrival order; a value that is not UTF-8 is read lossily
/// (a credential check then fails on it rather than the request failing to parse).
pub(crate) fn header_pairs(req: &Request) -> Vec<(String, String)> {
    req.headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// The `Content-Length` the sender declared, when it is a number.
pub(crate) fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
}
