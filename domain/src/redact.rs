//! Redaction of error text before it reaches a log line or the `last_error` column.
//!
//! A failed delivery's reason often quotes the receiver's answer, and receivers echo credentials
//! more often than one would hope (a token endpoint repeating the form it got, a proxy printing the
//! request headers). [`Redactor::redact`] therefore:
//!
//! 1. masks every configured secret value wherever it appears (and a trailing piece of one, left by
//!    a cut made before the text arrived here);
//! 2. masks the value after every secret-bearing key in the three shapes error text takes: JSON
//!    (`"token": "v"`), form or query (`token=v`) and header lines (`Authorization: Bearer v`), in
//!    any letter case, plus a bare `Bearer v` / `Basic v` credential;
//! 3. cuts the result to the byte limit (`http.maxErrorBodyBytes`) on a UTF-8 boundary.
//!
//! Masking runs before the cut so that the cut can never split a secret into an unrecognisable
//! piece. The key list errs on the side of masking: a masked harmless value costs a little
//! readability, a missed credential costs a rotation.

use std::fmt;

/// What a masked value is replaced with.
pub const MASK: &str = "***";

/// Normalised name fragments that mark a key as secret-bearing.
const SECRET_FRAGMENTS: [&str; 10] = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "authorization",
    "cookie",
    "signature",
    "credential",
    "session",
];

/// The shortest piece of a configured secret that is masked at the very end of a cut text.
const MIN_TRAILING_PIECE: usize = 4;

/// Masks secrets in text and cuts it to a byte limit.
///
/// `Debug` never prints the configured secret values.
#[derive(Clone)]
pub struct Redactor {
    secrets: Vec<String>,
    max_bytes: usize,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl Redactor {
    /// A redactor that keeps at most `max_bytes` bytes and knows no secret values yet.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            secrets: Vec::new(),
            max_bytes,
        }
    }

    /// Adds an exact secret value to mask. An empty value is ignored.
    #[must_use]
    pub fn with_secret(mut self, value: &str) -> Self {
        if !value.is_empty() && !self.secrets.iter().any(|s| s == value) {
            self.secrets.push(value.to_owned());
            // Longest first, so a secret that contains another is masked whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
        self
    }

    /// Adds several secret values.
    #[must_use]
    pub fn with_secrets<'a>(self, values: impl IntoIterator<Item = &'a str>) -> Self {
        values
            .into_iter()
            .fold(self, |redactor, value| redactor.with_secret(value))
    }

    /// The byte limit.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Masks secret values and secret-bearing keys, without cutting.
    pub fn mask(&self, text: &str) -> String {
        let mut masked = text.to_owned();
        for secret in &self.secrets {
            if masked.contains(secret.as_str()) {
                masked = masked.replace(secret.as_str(), MASK);
            }
        }
        for secret in &self.secrets {
            if let Some(start) = trailing_piece(&masked, secret) {
                masked.truncate(start);
                masked.push_str(MASK);
            }
        }
        mask_secret_keys(&masked)
    }

    /// Masks, then cuts to the byte limit.
    pub fn redact(&self, text: &str) -> String {
        let masked = self.mask(text);
        truncate_utf8(&masked, self.max_bytes).to_owned()
    }
}

/// Where a trailing piece (at least [`MIN_TRAILING_PIECE`] bytes, shorter than the whole) of
/// `secret` starts at the end of `text`, if one is there.
fn trailing_piece(text: &str, secret: &str) -> Option<usize> {
    let longest = secret.len().saturating_sub(1).min(text.len());
    (MIN_TRAILING_PIECE..=longest)
        .rev()
        .filter(|&len| secret.is_char_boundary(len))
        .find(|&len| text.ends_with(&secret[..len]))
        .map(|len| text.len() - len)
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a character boundary.
pub fn truncate_utf8(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// True when a key or header name is likely to carry a credential: any letter case, with `-`, `_`
/// and `.` ignored (so `api_key`, `API-Key`, `apiKey` and `x.api.key` are all caught).
pub fn is_secret_key(name: &str) -> bool {
    let normalised: String = name
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    normalised == "auth"
        || normalised.ends_with("key")
        || SECRET_FRAGMENTS
            .iter()
            .any(|fragment| normalised.contains(fragment))
}

/// Masks the value after every secret-bearing key, and bare `Bearer`/`Basic` credentials.
pub fn mask_secret_keys(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = is_word_byte(bytes[i]) && (i == 0 || !is_word_byte(bytes[i - 1]));
        if !starts_word {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word_byte(bytes[i]) {
            i += 1;
        }
        let word = &text[start..i];
        let value = if is_secret_key(word) {
            keyed_value(bytes, start, i)
        } else if word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic") {
            scheme_value(bytes, i)
        } else {
            None
        };
        if let Some((from, to)) = value {
            // Every boundary here sits next to an ASCII byte, so slicing stays on char boundaries.
            out.push_str(&text[copied..from]);
            out.push_str(MASK);
            copied = to;
            i = to;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Bytes that make up a key name.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The byte range of the value that follows a key ending at `key_end`, if a separator follows.
fn keyed_value(bytes: &[u8], key_start: usize, key_end: usize) -> Option<(usize, usize)> {
    let mut j = key_end;
    let opening = key_start.checked_sub(1).map(|p| bytes[p]);
    if opening == Some(b'<') && bytes.get(j) == Some(&b'>') {
        // XML: <password>value</password>
        let from = j + 1;
        let to = bytes[from..]
            .iter()
            .position(|&b| b == b'<')
            .map_or(bytes.len(), |offset| from + offset);
        return (to > from).then_some((from, to));
    }
    let quoted_key = matches!(opening, Some(b'"' | b'\''));
    if quoted_key && bytes.get(j).copied() == opening {
        j += 1;
    }
    j = skip_blanks(bytes, j);
    let separator = *bytes.get(j)?;
    if separator != b':' && separator != b'=' {
        return None;
    }
    j = skip_blanks(bytes, j + 1);
    let first = *bytes.get(j)?;
    if first == b'"' || first == b'\'' {
        let from = j + 1;
        let mut k = from;
        while k < bytes.len() && bytes[k] != first {
            // A backslash escapes the next byte (JSON); skipping it cannot land inside a
            // multi-byte character because the escaped byte is ASCII in valid JSON.
            k += if bytes[k] == b'\\' { 2 } else { 1 };
        }
        let to = k.min(bytes.len());
        return (to > from).then_some((from, to));
    }
    let header_line = separator == b':' && !quoted_key;
    let mut to = bytes[j..]
        .iter()
        .position(|&b| {
            if header_line {
                b == b'\r' || b == b'\n'
            } else {
                b.is_ascii_whitespace()
                    || matches!(
                        b,
                        b'&' | b',' | b';' | b'"' | b'\'' | b'}' | b']' | b')' | b'<' | b'>'
                    )
            }
        })
        .map_or(bytes.len(), |offset| j + offset);
    // `authorization=Bearer abc`: the credential is the word after the scheme, not the scheme.
    let value = &bytes[j..to];
    if (value.eq_ignore_ascii_case(b"bearer") || value.eq_ignore_ascii_case(b"basic"))
        && let Some((_, end)) = credential_after(bytes, to)
    {
        to = end;
    }
    (to > j).then_some((j, to))
}

/// The credential after `Bearer ` or `Basic `, when it looks like one (not an English word).
fn scheme_value(bytes: &[u8], scheme_end: usize) -> Option<(usize, usize)> {
    let (from, to) = credential_after(bytes, scheme_end)?;
    let value = &bytes[from..to];
    // A credential mixes cases, digits or symbols; "Basic authentication failed" does not.
    let looks_like_credential =
        value.len() >= 8 && value.iter().skip(1).any(|b| !b.is_ascii_lowercase());
    looks_like_credential.then_some((from, to))
}

/// The token-shaped run after the space that follows a scheme name.
fn credential_after(bytes: &[u8], scheme_end: usize) -> Option<(usize, usize)> {
    if bytes.get(scheme_end) != Some(&b' ') {
        return None;
    }
    let from = skip_blanks(bytes, scheme_end);
    let len = bytes[from..]
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
        .count();
    (len > 0).then_some((from, from + len))
}

fn skip_blanks(bytes: &[u8], mut j: usize) -> usize {
    while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(text: &str) -> String {
        mask_secret_keys(text)
    }

    #[test]
    fn json_values_of_secret_keys() {
        assert_eq!(
            masked(r#"{"access_token": "abc.def", "expires_in": 3600}"#),
            r#"{"access_token": "***", "expires_in": 3600}"#
        );
        assert_eq!(
            masked(r#"{"Password":"p\"w","user":"bob"}"#),
            r#"{"Password":"***","user":"bob"}"#
        );
        assert_eq!(
            masked(r#"{"pin":1,"apiKey":12345}"#),
            r#"{"pin":1,"apiKey":***}"#
        );
        assert_eq!(
            masked(r#"{"client_secret":"s","refresh_token":"r","signature":"x"}"#),
            r#"{"client_secret":"***","refresh_token":"***","signature":"***"}"#
        );
    }

    #[test]
    fn form_and_query_values() {
        assert_eq!(
            masked("grant_type=client_credentials&client_id=qb&client_secret=s3cr3t&scope=a"),
            "grant_type=client_credentials&client_id=qb&client_secret=***&scope=a"
        );
        assert_eq!(
            masked("GET /x?API-KEY=abc&page=2 failed"),
            "GET /x?API-KEY=***&page=2 failed"
        );
        assert_eq!(masked("token='quoted value' rest"), "token='***' rest");
        assert_eq!(masked("passwd=hunter2"), "passwd=***");
        assert_eq!(
            masked("authorization=Bearer abc123 next"),
            "authorization=*** next"
        );
    }

    #[test]
    fn header_lines() {
        assert_eq!(
            masked("Authorization: Bearer eyJhbGciOi.x.y\r\nX-Other: kept"),
            "Authorization: ***\r\nX-Other: kept"
        );
        assert_eq!(
            masked("cookie: a=1; b=2\nset-cookie: s=3\nHost: h"),
            "cookie: ***\nset-cookie: ***\nHost: h"
        );
        assert_eq!(masked("X-Api-Key: k1"), "X-Api-Key: ***");
    }

    #[test]
    fn xml_elements() {
        assert_eq!(
            masked("<user>bob</user><Password>pw1</Password>"),
            "<user>bob</user><Password>***</Password>"
        );
    }

    #[test]
    fn bare_credentials_after_a_scheme() {
        assert_eq!(
            masked("sent Bearer AbC123xyz.def then"),
            "sent Bearer *** then"
        );
        assert_eq!(masked("basic dXNlcjpwYXNz"), "basic ***");
        assert_eq!(
            masked("Basic authentication failed"),
            "Basic authentication failed"
        );
    }

    #[test]
    fn harmless_text_is_untouched() {
        for text in [
            "HTTP 503 Service Unavailable",
            "invalid token",
            "the token expired",
            r#"{"status":"error","message":"try later"}"#,
            "ünïcödé: ✓ stays",
            "",
        ] {
            assert_eq!(masked(text), text);
        }
    }

    #[test]
    fn secret_key_names() {
        for name in [
            "password",
            "PASSWD",
            "secret",
            "client_secret",
            "token",
            "access_token",
            "Refresh-Token",
            "api_key",
            "apikey",
            "API-Key",
            "x-api-key",
            "Authorization",
            "Proxy-Authorization",
            "cookie",
            "Set-Cookie",
            "X-Signature",
            "privateKey",
            "key",
            "auth",
        ] {
            assert!(is_secret_key(name), "{name}");
        }
        for name in ["user", "client_id", "scope", "status", "keyboard", "author"] {
            assert!(!is_secret_key(name), "{name}");
        }
    }

    #[test]
    fn configured_secret_values_are_masked_anywhere() {
        let r = Redactor::new(1000).with_secrets(["hunter2", "", "hunter2-long"]);
        assert_eq!(
            r.redact("echo: hunter2-long and xhunter2x"),
            "echo: *** and x***x"
        );
        // A piece of a secret left at the end by an earlier cut is masked too.
        assert_eq!(r.redact("body was: hunt"), "body was: ***");
        assert_eq!(r.redact("hun"), "hun");
    }

    #[test]
    fn cuts_on_a_utf8_boundary_after_masking() {
        let r = Redactor::new(5);
        assert_eq!(r.redact("abcdefgh"), "abcde");
        assert_eq!(r.redact("abcdé"), "abcd");
        assert_eq!(r.redact("ab"), "ab");
        assert_eq!(truncate_utf8("€€", 4), "€");
        assert_eq!(truncate_utf8("€", 0), "");
        // Masking first: the limit never splits the secret into an unrecognised piece.
        let r = Redactor::new(12).with_secret("topsecretvalue");
        assert_eq!(r.redact("k topsecretvalue"), "k ***");
    }

    #[test]
    fn debug_does_not_print_secrets() {
        let r = Redactor::new(10).with_secret("hunter2");
        let printed = format!("{r:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert_eq!(r.max_bytes(), 10);
    }
}
