//! What an inbox row can hold, checked before the insert so that a value the table would refuse is
//! the sender's clear 4xx (or a broker message's dead row), never a database error answered 500.
//!
//! The widths are the documented column types of the inbox table (`VARCHAR(255)` for the key, the
//! aggregate id and the event type, `VARCHAR(128)` for the correlation id). PostgreSQL counts a
//! `VARCHAR(n)` in characters, so the checks do too. No text column and no JSONB value can hold the
//! character U+0000: PostgreSQL refuses it in `text` and in JSONB strings and keys alike.

use serde_json::Value;
use std::fmt;
use thiserror::Error;

/// The most characters of `idempotency_key`, `aggregate_id` and `event_type`.
pub const MAX_KEY_CHARS: usize = 255;

/// A row field the checks name in their refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowField {
    /// `idempotency_key`.
    IdempotencyKey,
    /// `aggregate_id`.
    AggregateId,
    /// `event_type`.
    EventType,
    /// `correlation_id`.
    CorrelationId,
}

impl RowField {
    /// The words a refusal uses for the field.
    pub fn describe(self) -> &'static str {
        match self {
            RowField::IdempotencyKey => "idempotency key",
            RowField::AggregateId => "aggregate id",
            RowField::EventType => "event type",
            RowField::CorrelationId => "correlation id",
        }
    }
}

impl fmt::Display for RowField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why a message cannot be stored as it is. The text is the sender's answer (and a dead row's
/// `last_error`): it names the field and the limit, never the value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Unstorable {
    /// A field is longer than its column.
    #[error("the {field} is {chars} characters long; the inbox stores at most {max}")]
    TooLong {
        /// Which field.
        field: RowField,
        /// Its length in characters.
        chars: usize,
        /// The column's width.
        max: usize,
    },
    /// A field holds U+0000.
    #[error("the {field} holds the character U+0000, which the inbox cannot store")]
    NulInField {
        /// Which field.
        field: RowField,
    },
    /// A string or a member name of the payload holds U+0000 (written `\u0000` in JSON).
    #[error(
        "the payload holds the character U+0000 (\\u0000) at {path}, which the inbox cannot store"
    )]
    NulInPayload {
        /// Where, as a JSONPath (`$.a[2]`, or `$` for the document itself).
        path: String,
    },
    /// A header name or value holds U+0000 (only a broker message can carry one).
    #[error("a header holds the character U+0000, which the inbox cannot store")]
    NulInHeader,
}

/// Checks one text field against its column.
///
/// # Errors
/// [`Unstorable::NulInField`] or [`Unstorable::TooLong`].
pub fn check_field(field: RowField, value: &str, max: usize) -> Result<(), Unstorable> {
    if value.contains('\0') {
        return Err(Unstorable::NulInField { field });
    }
    // A byte count at most `max` cannot hold more than `max` characters: skip the count.
    if value.len() > max {
        let chars = value.chars().count();
        if chars > max {
            return Err(Unstorable::TooLong { field, chars, max });
        }
    }
    Ok(())
}

/// Checks the header pairs the row would store.
///
/// # Errors
/// [`Unstorable::NulInHeader`].
pub fn check_headers(headers: &[(String, String)]) -> Result<(), Unstorable> {
    if headers
        .iter()
        .any(|(name, value)| name.contains('\0') || value.contains('\0'))
    {
        return Err(Unstorable::NulInHeader);
    }
    Ok(())
}

/// Checks that the JSON text `payload` holds no U+0000, and `document` (the same payload parsed)
/// to find where. The text is searched first for the only way JSON can write the character
/// (`\u0000`, since a raw control character is not allowed in a JSON string), so a payload without
/// it costs one scan and no walk.
///
/// # Errors
/// [`Unstorable::NulInPayload`] naming the first place found.
pub fn check_payload_text(payload: &str) -> Result<(), Unstorable> {
    if !may_hold_nul(payload.as_bytes()) {
        return Ok(());
    }
    // The escape can also be the text `\\u0000` (an escaped backslash before `u0000`): only the
    // parsed document tells. A payload that does not parse is not this check's business.
    match serde_json::from_str::<Value>(payload) {
        Ok(document) => check_payload(&document),
        Err(_) => Ok(()),
    }
}

/// Whether the JSON text `json` can hold U+0000: only through the escape `\u0000`, because JSON
/// allows no raw control character in a string. `false` is certain; `true` needs
/// [`check_payload`] (the text may be an escaped backslash followed by `u0000`).
pub fn may_hold_nul(json: &[u8]) -> bool {
    json.split(|&byte| byte == b'\\')
        .skip(1)
        .any(|after_backslash| after_backslash.starts_with(b"u0000"))
}

/// Checks a parsed payload for U+0000 in any string or member name.
///
/// # Errors
/// [`Unstorable::NulInPayload`] naming the first place found.
pub fn check_payload(document: &Value) -> Result<(), Unstorable> {
    match nul_path(document) {
        Some(path) => Err(Unstorable::NulInPayload { path }),
        None => Ok(()),
    }
}

/// The JSONPath of the first string or member name holding U+0000, depth first. Iterative, so a
/// deep document cannot exhaust the stack.
fn nul_path(document: &Value) -> Option<String> {
    let mut stack: Vec<(&Value, String)> = vec![(document, "$".to_owned())];
    while let Some((value, path)) = stack.pop() {
        match value {
            Value::String(text) if text.contains('\0') => return Some(path),
            Value::Object(members) => {
                for (name, member) in members.iter().rev() {
                    let member_path = format!("{path}[{}]", quoted(name));
                    if name.contains('\0') {
                        return Some(member_path);
                    }
                    stack.push((member, member_path));
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate().rev() {
                    stack.push((item, format!("{path}[{index}]")));
                }
            }
            _ => {}
        }
    }
    None
}

/// A member name as a bracketed JSONPath string, with the NUL and other control characters
/// written as escapes so the answer stays one printable line.
fn quoted(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('\'');
    for c in name.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_within_its_width_passes_and_one_beyond_is_refused_by_characters() {
        // 255 two-byte characters are 510 bytes but fit the column.
        assert!(check_field(RowField::IdempotencyKey, &"é".repeat(255), 255).is_ok());
        let refusal = check_field(RowField::IdempotencyKey, &"é".repeat(256), 255).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "the idempotency key is 256 characters long; the inbox stores at most 255"
        );
        assert_eq!(
            check_field(RowField::CorrelationId, &"x".repeat(129), 128)
                .unwrap_err()
                .to_string(),
            "the correlation id is 129 characters long; the inbox stores at most 128"
        );
    }

    #[test]
    fn a_nul_in_a_field_is_refused() {
        assert_eq!(
            check_field(RowField::EventType, "a\0b", 255)
                .unwrap_err()
                .to_string(),
            "the event type holds the character U+0000, which the inbox cannot store"
        );
    }

    #[test]
    fn a_nul_in_the_payload_is_found_with_its_path() {
        let document = json!({"a": [1, {"b": "x\u{0}y"}], "c": "fine"});
        assert_eq!(
            check_payload(&document),
            Err(Unstorable::NulInPayload {
                path: "$['a'][1]['b']".into()
            })
        );
        let in_name = json!({"ok": {"bad\u{0}name": 1}});
        assert_eq!(
            check_payload(&in_name),
            Err(Unstorable::NulInPayload {
                path: "$['ok']['bad\\u0000name']".into()
            })
        );
        assert_eq!(
            check_payload(&json!("\u{0}")),
            Err(Unstorable::NulInPayload { path: "$".into() })
        );
        assert!(check_payload(&json!({"a": ["b", 1, null, true]})).is_ok());
    }

    #[test]
    fn the_text_check_tells_an_escaped_backslash_from_a_nul() {
        assert!(check_payload_text(r#"{"a":"\\u0000"}"#).is_ok());
        assert!(check_payload_text(r#"{"a":"\u0000"}"#).is_err());
        assert!(check_payload_text(r#"{"a":"plain"}"#).is_ok());
    }

    #[test]
    fn a_deep_document_is_walked_without_recursion() {
        let mut document = json!("\u{0}");
        for _ in 0..3_000 {
            document = Value::Array(vec![document]);
        }
        let Err(Unstorable::NulInPayload { path }) = check_payload(&document) else {
            panic!("the NUL at the bottom was not found");
        };
        assert!(path.ends_with("[0]"));
        // serde_json's Value drops recursively: forget the deep value instead of overflowing
        // the test thread's stack when it goes out of scope.
        std::mem::forget(document);
    }

    #[test]
    fn headers_with_a_nul_are_refused() {
        assert!(check_headers(&[("a".into(), "b".into())]).is_ok());
        assert_eq!(
            check_headers(&[("a".into(), "b\0".into())]),
            Err(Unstorable::NulInHeader)
        );
    }
}
