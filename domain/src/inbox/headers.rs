//! Which received headers an inbox row keeps in its `headers` column.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// What a header value kept as Base64 starts with.
pub const BASE64_VALUE_PREFIX: &str = "base64:";

/// A received header value of raw bytes as the text the inbox stores: the bytes themselves when
/// they are UTF-8 without U+0000 (which the `headers` column cannot hold), otherwise
/// [`BASE64_VALUE_PREFIX`] and the standard Base64 (with padding) of the bytes, so nothing is lost.
pub fn header_text(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(text) if !text.contains('\0') => text.to_owned(),
        _ => format!("{BASE64_VALUE_PREFIX}{}", STANDARD.encode(value)),
    }
}

/// Headers that carry credentials whatever the source's auth block says; never stored.
const ALWAYS_WITHHELD: [&str; 3] = ["Authorization", "Proxy-Authorization", "Cookie"];

/// The headers to store: one value per name (a repeated name keeps its last value, at the place
/// of its first appearance), without `Authorization`, `Proxy-Authorization`, `Cookie` and
/// `credential_header` (the header the source's auth block reads), each in any letter case.
///
/// A stored row is read by pull workers, copied into outbox rows and sent to destinations, so a
/// credential kept here would travel much further than the request that carried it.
pub fn stored_headers(
    received: &[(String, String)],
    credential_header: Option<&str>,
) -> Vec<(String, String)> {
    let withheld = |name: &str| {
        ALWAYS_WITHHELD
            .iter()
            .copied()
            .chain(credential_header)
            .any(|credential| credential.eq_ignore_ascii_case(name))
    };
    let mut kept: Vec<(String, String)> = Vec::with_capacity(received.len());
    for (name, value) in received {
        if withheld(name) {
            continue;
        }
        match kept
            .iter_mut()
            .find(|(seen, _)| seen.eq_ignore_ascii_case(name))
        {
            Some(slot) => *slot = (name.clone(), value.clone()),
            None => kept.push((name.clone(), value.clone())),
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    #[test]
    fn utf8_values_are_kept_and_other_bytes_become_prefixed_base64() {
        assert_eq!(super::header_text(b"acme"), "acme");
        assert_eq!(super::header_text("é".as_bytes()), "é");
        assert_eq!(super::header_text(b""), "");
        assert_eq!(super::header_text(&[0xff, 0xfe, 0x00]), "base64://4A");
        assert_eq!(super::header_text(b"a\0b"), "base64:YQBi");
    }

    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn credentials_never_stay_in_any_letter_case() {
        let received = pairs(&[
            ("authorization", "Bearer t"),
            ("PROXY-AUTHORIZATION", "Basic x"),
            ("Cookie", "session=1"),
            ("x-api-key", "k"),
            ("X-Tenant", "acme"),
        ]);
        assert_eq!(
            stored_headers(&received, Some("X-API-Key")),
            pairs(&[("X-Tenant", "acme")])
        );
        // Without an auth block, a header that happens to be named like a key is ordinary.
        assert_eq!(
            stored_headers(&received, None),
            pairs(&[("x-api-key", "k"), ("X-Tenant", "acme")])
        );
    }

    #[test]
    fn a_repeated_name_keeps_its_last_value() {
        let received = pairs(&[("x-a", "1"), ("x-b", "2"), ("X-A", "3")]);
        assert_eq!(
            stored_headers(&received, None),
            pairs(&[("X-A", "3"), ("x-b", "2")])
        );
    }
}
