//! Redaction of error text before it reaches `last_error` or a log line.
//!
//! A handler error quotes whatever failed: a connection string, an HTTP answer that echoes the
//! request headers, a token endpoint repeating its form. The row outlives the incident and is read
//! by people who should not see credentials, so the text is masked and cut before it is written.
//! The rule errs towards masking: a masked harmless value costs readability, a leaked one a
//! rotation.

/// What replaces a masked value.
pub const MASK: &str = "***";

/// The most bytes of error text written to `last_error`.
pub const MAX_ERROR_LENGTH: usize = 2048;

/// Name fragments that make a key secret-bearing (compared without case, `_` and `-`).
const SECRET_KEY_FRAGMENTS: [&str; 12] = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "signature",
    "credential",
    "session",
    "privatekey",
];

/// Masks secret-looking values and cuts the text to [`MAX_ERROR_LENGTH`] bytes.
pub fn sanitize(text: &str) -> String {
    let masked = mask_url_passwords(text);
    let masked = mask_schemes(&masked);
    let masked = mask_keyed_values(&masked);
    cut(&masked, MAX_ERROR_LENGTH).to_owned()
}

/// [`sanitize`] applied to the display text of an error.
pub fn sanitize_error(error: &dyn std::fmt::Display) -> String {
    sanitize(&error.to_string())
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `scheme://user:password@host` -> `scheme://user:***@host`.
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let (head, tail) = rest.split_at(pos + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str(MASK);
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

/// `Bearer abc` / `Basic abc` -> `Bearer ***`.
fn mask_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut words = text.split_inclusive(char::is_whitespace).peekable();
    while let Some(word) = words.next() {
        out.push_str(word);
        let bare = word.trim();
        if (bare.eq_ignore_ascii_case("bearer") || bare.eq_ignore_ascii_case("basic"))
            && word.ends_with(char::is_whitespace)
            && let Some(next) = words.next()
        {
            let trailing: String = next.chars().filter(|c| c.is_whitespace()).collect();
            out.push_str(MASK);
            out.push_str(&trailing);
        }
    }
    out
}

fn is_secret_key(key: &str) -> bool {
    let normal: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    !normal.is_empty() && SECRET_KEY_FRAGMENTS.iter().any(|f| normal.contains(f))
}

/// Masks the value after a secret-bearing key in `key=value`, `key: value` and `"key": "value"`.
fn mask_keyed_values(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let sep = bytes[i];
        if sep != b'=' && sep != b':' {
            i += 1;
            continue;
        }
        // The key: the word just before the separator, maybe closed by a quote.
        let mut key_end = i;
        if key_end > 0 && (bytes[key_end - 1] == b'"' || bytes[key_end - 1] == b'\'') {
            key_end -= 1;
        }
        let mut key_start = key_end;
        while key_start > 0
            && (bytes[key_start - 1].is_ascii_alphanumeric()
                || bytes[key_start - 1] == b'_'
                || bytes[key_start - 1] == b'-')
        {
            key_start -= 1;
        }
        if key_start == key_end || !is_secret_key(&text[key_start..key_end]) {
            i += 1;
            continue;
        }
        // The value: skip blanks and an opening quote, then run to the closing quote or the end
        // of the word (a header line runs to the end of the line).
        let mut v = i + 1;
        while v < bytes.len() && bytes[v] == b' ' {
            v += 1;
        }
        let quote = if v < bytes.len() && (bytes[v] == b'"' || bytes[v] == b'\'') {
            v += 1;
            Some(bytes[v - 1])
        } else {
            None
        };
        let mut end = v;
        while end < bytes.len() {
            let b = bytes[end];
            let stop = match quote {
                Some(q) => b == q,
                None if sep == b':' => b == b'\n' || b == b'\r' || b == b',' || b == b'}',
                None => b.is_ascii_whitespace() || b == b'&' || b == b',' || b == b';',
            };
            if stop {
                break;
            }
            end += 1;
        }
        if end > v {
            out.push_str(&text[copied..v]);
            out.push_str(MASK);
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_form_json_header_url_and_bearer_values() {
        let text = "password=hunter2&user=bob\n{\"api_key\": \"k-123\"}\nAuthorization: Bearer abc.def\n\
                    postgres://app:s3cret@db:5432/x Bearer xyz";
        let clean = sanitize(text);
        for leaked in ["hunter2", "k-123", "abc.def", "s3cret", "xyz"] {
            assert!(!clean.contains(leaked), "{leaked} leaked in {clean}");
        }
        assert!(clean.contains("user=bob"), "{clean}");
        assert!(clean.contains("postgres://app:***@db:5432/x"), "{clean}");
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        let text = "é".repeat(MAX_ERROR_LENGTH);
        let clean = sanitize(&text);
        assert!(clean.len() <= MAX_ERROR_LENGTH);
        assert!(clean.chars().all(|c| c == 'é'));
    }

    #[test]
    fn leaves_harmless_text_alone() {
        assert_eq!(
            sanitize("order 42 failed: total=12"),
            "order 42 failed: total=12"
        );
    }
}
