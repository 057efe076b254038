//! The rules an inbox source applies to a received message before it stores it: the credential
//! checks, the header filter, the correlation id and which headers the row keeps.
//!
//! Every rule here is pure: the caller passes the received headers (as `(name, value)` pairs in
//! arrival order), the raw body, the clock reading and the id generator.

pub mod auth;
pub mod correlation;
pub mod dead_letter;
pub mod filter;
pub mod headers;
pub mod limits;
pub mod signatures;

/// The last value of the header `name` (any letter case), as a repeated header keeps its last
/// value everywhere the inbox reads headers.
pub fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .rev()
        .find(|(candidate, _)| candidate.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

#[cfg(test)]
mod tests {
    use super::header_value;

    #[test]
    fn the_last_value_wins_in_any_letter_case() {
        let headers = vec![
            ("X-Tenant".to_owned(), "a".to_owned()),
            ("x-tenant".to_owned(), "b".to_owned()),
        ];
        assert_eq!(header_value(&headers, "X-TENANT"), Some("b"));
        assert_eq!(header_value(&headers, "X-Other"), None);
    }
}
