//! HTML text: escaping every value that came from a row or a request, the page frame, the
//! security headers, and reading form and query text.

use salvo::http::StatusCode;
use salvo::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use salvo::prelude::Response;

/// The Content-Security-Policy of every console answer: only the console's own script and style,
/// no inline code, no frames, forms post only to the console itself.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `text` with the five HTML-significant characters replaced, safe in element text and in a
/// quoted attribute value.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// `text` percent-encoded for a query value.
pub(crate) fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The (name, value) pairs of a query string or an `application/x-www-form-urlencoded` body,
/// decoded; a malformed escape is kept as written.
pub(crate) fn parse_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high * 16 + low);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|digit| u8::try_from(digit).ok())
}

/// The first value of `name`, trimmed; `None` when absent or blank.
pub(crate) fn first(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Every value of `name`.
pub(crate) fn all<'a>(
    pairs: &'a [(String, String)],
    name: &'a str,
) -> impl Iterator<Item = &'a str> {
    pairs
        .iter()
        .filter(move |(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Sets the headers every console answer carries.
pub(crate) fn security_headers(res: &mut Response) {
    let headers = res.headers_mut();
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// Writes `body` as an HTML answer with `status`.
pub(crate) fn write_html(res: &mut Response, status: StatusCode, body: String) {
    res.status_code(status);
    security_headers(res);
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    let _ = res.write_body(body);
}

/// A whole page: the frame, the navigation and `content` (already escaped HTML).
pub(crate) fn page(title: &str, content: &str, signed_in: bool) -> String {
    let nav = if signed_in {
        "<nav><a href=\"/console\">Overview</a><a href=\"/console/dead/outbox\">Dead outbox</a>\
         <a href=\"/console/dead/inbox\">Dead inbox</a><a href=\"/console/lookup\">Lookup</a></nav>"
    } else {
        ""
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · QueueBox console</title>\
         <link rel=\"stylesheet\" href=\"/console/assets/console.css\">\
         <script src=\"/console/assets/console.js\" defer></script></head>\
         <body><header><strong>QueueBox console</strong>{nav}</header><main>\
         <h1>{title}</h1>{content}</main></body></html>\n",
        title = esc(title),
    )
}

/// A short text of at most `max` characters, with `…` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut cut: String = text.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_markup_character_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script>\"&"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot;&amp;"
        );
        assert_eq!(
            esc("\"><img src=x onerror=alert(1)>"),
            "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
        );
    }

    #[test]
    fn pairs_are_decoded() {
        let pairs = parse_pairs("a=1&b=x+y%3Cz&id=1&id=2&bad=%G1&empty=");
        assert_eq!(first(&pairs, "b").as_deref(), Some("x y<z"));
        assert_eq!(all(&pairs, "id").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(first(&pairs, "bad").as_deref(), Some("%G1"));
        assert_eq!(first(&pairs, "empty"), None);
        assert_eq!(url_encode("a b&<"), "a%20b%26%3C");
    }
}
