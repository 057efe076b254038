//! The outbox row as a delivery template reads it.
//!
//! Templates render once per published message, so the row is borrowed, not copied, and the
//! payload (JSON text in the outbox) is parsed only when a template first asks for a payload
//! field, then kept for the other templates of the same message.

use serde_json::Value;
use std::cell::OnceCell;
use std::fmt::Write as _;

/// The columns of one outbox row that templates read.
#[derive(Debug)]
pub struct RowFields<'a> {
    topic: &'a str,
    key: Option<&'a str>,
    aggregate_type: Option<&'a str>,
    payload: &'a str,
    /// The parsed payload; `None` inside when the text is not JSON.
    parsed: OnceCell<Option<Value>>,
}

impl<'a> RowFields<'a> {
    /// A row with `topic`, `key`, `aggregate_type` and the payload as JSON text. An empty key or
    /// aggregate type counts as absent, the same as SQL `NULL`.
    pub fn new(
        topic: &'a str,
        key: Option<&'a str>,
        aggregate_type: Option<&'a str>,
        payload: &'a str,
    ) -> Self {
        Self {
            topic,
            key: key.filter(|k| !k.is_empty()),
            aggregate_type: aggregate_type.filter(|t| !t.is_empty()),
            payload,
            parsed: OnceCell::new(),
        }
    }

    /// The `topic` column.
    pub fn topic(&self) -> &'a str {
        self.topic
    }

    /// The `key` column, `None` when absent or empty.
    pub fn key(&self) -> Option<&'a str> {
        self.key
    }

    /// The `aggregate_type` column, `None` when absent or empty.
    pub fn aggregate_type(&self) -> Option<&'a str> {
        self.aggregate_type
    }

    /// The payload value at `path` (object members, outermost first). `None` when the payload is
    /// not JSON, a step is not an object member, or the value is `null`: a `null` field carries no
    /// value to put in an address or a key.
    pub fn payload_field(&self, path: &[String]) -> Option<&Value> {
        let document = self
            .parsed
            .get_or_init(|| serde_json::from_str(self.payload).ok())
            .as_ref()?;
        let value = path
            .iter()
            .try_fold(document, |value, name| value.as_object()?.get(name))?;
        (!value.is_null()).then_some(value)
    }

    /// True once the payload text has been parsed (for tests of the lazy parse).
    pub fn payload_parsed(&self) -> bool {
        self.parsed.get().is_some()
    }
}

/// Appends `value` to `out`: a string as its text, anything else (number, boolean, object, array)
/// as compact JSON text.
pub(crate) fn push_value(out: &mut String, value: &Value) {
    match value {
        Value::String(text) => out.push_str(text),
        // Writing into a String cannot fail.
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<String> {
        text.split('.').map(str::to_owned).collect()
    }

    #[test]
    fn nested_fields_and_what_counts_as_missing() {
        let row = RowFields::new(
            "t",
            None,
            None,
            r#"{"a":{"b":"x","n":null,"list":[1]},"s":""}"#,
        );
        assert_eq!(row.payload_field(&path("a.b")), Some(&Value::from("x")));
        assert_eq!(row.payload_field(&path("s")), Some(&Value::from("")));
        assert_eq!(row.payload_field(&path("a.n")), None);
        assert_eq!(row.payload_field(&path("a.zz")), None);
        assert_eq!(row.payload_field(&path("a.b.c")), None);
        // A dot names object members only; an array has none.
        assert_eq!(row.payload_field(&path("a.list.0")), None);
    }

    #[test]
    fn a_payload_that_is_not_json_has_no_fields() {
        let row = RowFields::new("t", None, None, "not json");
        assert_eq!(row.payload_field(&path("a")), None);
        assert!(row.payload_parsed());
    }

    #[test]
    fn the_payload_is_parsed_on_first_use_only() {
        let row = RowFields::new("t", Some("k"), Some("Order"), r#"{"a":1}"#);
        assert_eq!(row.topic(), "t");
        assert_eq!(row.key(), Some("k"));
        assert_eq!(row.aggregate_type(), Some("Order"));
        assert!(!row.payload_parsed());
        assert!(row.payload_field(&path("a")).is_some());
        assert!(row.payload_parsed());
    }

    #[test]
    fn empty_columns_are_absent() {
        let row = RowFields::new("t", Some(""), Some(""), "{}");
        assert_eq!(row.key(), None);
        assert_eq!(row.aggregate_type(), None);
    }

    #[test]
    fn values_render_as_text_or_compact_json() {
        let mut out = String::new();
        for value in [
            Value::from("eu"),
            Value::from(42),
            Value::from(true),
            serde_json::json!({"b": [1, "x"], "a": null}),
        ] {
            push_value(&mut out, &value);
            out.push('|');
        }
        assert_eq!(out, r#"eu|42|true|{"b":[1,"x"],"a":null}|"#);
    }
}
