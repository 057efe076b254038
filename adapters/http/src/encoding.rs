//! `Content-Encoding` of an inbox request: a gzip or deflate body is decoded before the pipeline
//! sees it, under the same `inbox.maxBodyBytes` cap as a plain body (counted after decoding, so a
//! small compressed bomb stops at the cap); any other coding is refused by name.

use flate2::read::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use std::io::Read;

/// The request header naming the codings applied to the body, in the order they were applied.
pub(crate) const CONTENT_ENCODING: &str = "content-encoding";

/// What decoding a body gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// The body as the sender wrote it before compressing.
    Body(Vec<u8>),
    /// Decoded, the body is longer than the cap.
    TooLarge,
    /// A coding QueueBox does not decode (answered 415, naming it).
    Unsupported(String),
    /// The body is not valid in the coding it claims (answered 400).
    Corrupt {
        /// The coding.
        coding: String,
        /// What the decoder said.
        cause: String,
    },
}

/// The codings named by the `Content-Encoding` values, in the order they were applied (a list
/// may come as one comma-separated value or as several headers); `identity` is dropped.
pub(crate) fn codings(headers: &[(String, String)]) -> Vec<String> {
    headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(CONTENT_ENCODING))
        .flat_map(|(_, value)| value.split(','))
        .map(|coding| coding.trim().to_ascii_lowercase())
        .filter(|coding| !coding.is_empty() && coding != "identity")
        .collect()
}

/// Undoes `codings` (applied first to last, so undone last to first), keeping at most
/// `max_bytes` bytes of every stage's output.
pub(crate) fn decode(codings: &[String], body: Vec<u8>, max_bytes: usize) -> Decoded {
    if let Some(unsupported) = codings
        .iter()
        .find(|coding| !matches!(coding.as_str(), "gzip" | "x-gzip" | "deflate"))
    {
        return Decoded::Unsupported(unsupported.clone());
    }
    let mut body = body;
    for coding in codings.iter().rev() {
        let decoded = match coding.as_str() {
            "deflate" => inflate(&body, max_bytes),
            _ => bounded_read(MultiGzDecoder::new(body.as_slice()), max_bytes),
        };
        match decoded {
            Ok(Some(bytes)) => body = bytes,
            Ok(None) => return Decoded::TooLarge,
            Err(cause) => {
                return Decoded::Corrupt {
                    coding: coding.clone(),
                    cause: cause.to_string(),
                };
            }
        }
    }
    Decoded::Body(body)
}

/// HTTP's `deflate` is the zlib format, but some senders send a raw deflate stream: the zlib
/// reading is tried first.
fn inflate(body: &[u8], max_bytes: usize) -> std::io::Result<Option<Vec<u8>>> {
    bounded_read(ZlibDecoder::new(body), max_bytes)
        .or_else(|_| bounded_read(DeflateDecoder::new(body), max_bytes))
}

/// Reads at most `max_bytes` from `reader`; `None` when there is more.
fn bounded_read(reader: impl Read, max_bytes: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader.take(limit).read_to_end(&mut out)?;
    if out.len() > max_bytes {
        Ok(None)
    } else {
        Ok(Some(out))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn list(codings: &[&str]) -> Vec<String> {
        codings.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn codings_are_read_from_every_value_in_order() {
        let headers = vec![
            ("Content-Encoding".to_owned(), "gzip, identity".to_owned()),
            ("content-encoding".to_owned(), "DEFLATE".to_owned()),
            ("x-other".to_owned(), "br".to_owned()),
        ];
        assert_eq!(codings(&headers), list(&["gzip", "deflate"]));
    }

    #[test]
    fn gzip_and_both_deflate_forms_decode() {
        let body = br#"{"id":"evt-1"}"#;
        assert_eq!(
            decode(&list(&["gzip"]), gzip(body), 100),
            Decoded::Body(body.to_vec())
        );
        let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
        zlib.write_all(body).unwrap();
        assert_eq!(
            decode(&list(&["deflate"]), zlib.finish().unwrap(), 100),
            Decoded::Body(body.to_vec())
        );
        let mut raw = DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(body).unwrap();
        assert_eq!(
            decode(&list(&["deflate"]), raw.finish().unwrap(), 100),
            Decoded::Body(body.to_vec())
        );
        // Two codings are undone last first.
        assert_eq!(
            decode(&list(&["gzip", "gzip"]), gzip(&gzip(body)), 100),
            Decoded::Body(body.to_vec())
        );
    }

    #[test]
    fn a_bomb_stops_at_the_cap() {
        let bomb = gzip(&vec![b' '; 10_000_000]);
        assert!(bomb.len() < 20_000, "{}", bomb.len());
        assert_eq!(decode(&list(&["gzip"]), bomb, 1024), Decoded::TooLarge);
        // Exactly the cap passes.
        assert_eq!(
            decode(&list(&["gzip"]), gzip(&[b'a'; 1024]), 1024),
            Decoded::Body(vec![b'a'; 1024])
        );
    }

    #[test]
    fn other_codings_are_named_and_broken_bodies_reported() {
        assert_eq!(
            decode(&list(&["gzip", "br"]), b"x".to_vec(), 10),
            Decoded::Unsupported("br".into())
        );
        assert!(matches!(
            decode(&list(&["gzip"]), b"not gzip".to_vec(), 100),
            Decoded::Corrupt { coding, .. } if coding == "gzip"
        ));
    }
}
