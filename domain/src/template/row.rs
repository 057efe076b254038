//! The outbox row as a delivery template reads it.
//!
//! Templates render once per published message, so the row is borrowed, not copied, and the
//! payload (JSON text in the outbox) is never turned into a document: a payload placeholder scans
//! the text once, skipping every member off its path, and borrows the string it finds. A row
//! whose templates read no payload field never touches the payload at all.

use serde::Deserialize as _;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt::{self, Write as _};

/// The columns of one outbox row that templates read.
#[derive(Debug)]
pub struct RowFields<'a> {
    topic: &'a str,
    key: Option<&'a str>,
    aggregate_type: Option<&'a str>,
    payload: &'a str,
    /// How often the payload text was scanned (for the tests of laziness).
    payload_reads: Cell<u32>,
}

/// A payload value found by a placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadValue<'a> {
    /// A JSON string, borrowed from the payload when it holds no escape.
    Text(Cow<'a, str>),
    /// A number, a boolean, an object or an array.
    Json(Value),
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
            payload_reads: Cell::new(0),
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
    /// value to put in an address or a key. A repeated member counts in its last occurrence, as a
    /// JSON parser that builds the document would keep it.
    pub fn payload_field(&self, path: &[String]) -> Option<PayloadValue<'a>> {
        self.payload_reads
            .set(self.payload_reads.get().saturating_add(1));
        let mut deserializer = serde_json::Deserializer::from_str(self.payload);
        // Text after the document is not looked at: the outbox column holds one JSON value.
        PathSeed { path }
            .deserialize(&mut deserializer)
            .ok()
            .flatten()
    }

    /// How often a placeholder has read the payload of this row.
    pub fn payload_reads(&self) -> u32 {
        self.payload_reads.get()
    }
}

/// Appends `value` to `out`: a string as its text, anything else as compact JSON text.
pub(crate) fn push_value(out: &mut String, value: &PayloadValue<'_>) {
    match value {
        PayloadValue::Text(text) => out.push_str(text),
        // Writing into a String cannot fail.
        PayloadValue::Json(other) => {
            let _ = write!(out, "{other}");
        }
    }
}

/// Walks `path` through the document as it is read; every member off the path is skipped
/// without being built.
struct PathSeed<'p> {
    path: &'p [String],
}

impl<'de> DeserializeSeed<'de> for PathSeed<'_> {
    type Value = Option<PayloadValue<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PathSeed<'_> {
    type Value = Option<PayloadValue<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some((name, rest)) = self.path.split_first() else {
            return Value::deserialize(MapAccessDeserializer::new(map))
                .map(|value| Some(PayloadValue::Json(value)));
        };
        let mut found = None;
        while let Some(matches) = map.next_key_seed(KeyIs(name))? {
            if matches {
                found = map.next_value_seed(PathSeed { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        if !self.path.is_empty() {
            // A dot names object members only; skip the array whole.
            IgnoredAny.visit_seq(seq)?;
            return Ok(None);
        }
        Value::deserialize(SeqAccessDeserializer::new(seq))
            .map(|value| Some(PayloadValue::Json(value)))
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(self
            .path
            .is_empty()
            .then_some(PayloadValue::Text(Cow::Borrowed(text))))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        // A string with escapes reaches here, unescaped into a buffer.
        Ok(self
            .path
            .is_empty()
            .then(|| PayloadValue::Text(Cow::Owned(text.to_owned()))))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(self.leaf(Value::Bool(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(self.leaf(Value::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(self.leaf(Value::from(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(self.leaf(Value::from(value)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

impl PathSeed<'_> {
    /// A scalar is the value only at the end of the path.
    fn leaf<'de>(&self, value: Value) -> Option<PayloadValue<'de>> {
        self.path.is_empty().then_some(PayloadValue::Json(value))
    }
}

/// Reads an object key and says whether it is `name`, without copying it.
struct KeyIs<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<String> {
        text.split('.').map(str::to_owned).collect()
    }

    fn text(value: &str) -> Option<PayloadValue<'_>> {
        Some(PayloadValue::Text(Cow::Borrowed(value)))
    }

    #[test]
    fn nested_fields_and_what_counts_as_missing() {
        let row = RowFields::new(
            "t",
            None,
            None,
            r#"{"skip":{"deep":[1,{"b":2}]},"a":{"b":"x","n":null,"list":[1]},"s":"","t":true}"#,
        );
        assert_eq!(row.payload_field(&path("a.b")), text("x"));
        assert_eq!(row.payload_field(&path("s")), text(""));
        assert_eq!(
            row.payload_field(&path("t")),
            Some(PayloadValue::Json(Value::Bool(true)))
        );
        assert_eq!(row.payload_field(&path("a.n")), None);
        assert_eq!(row.payload_field(&path("a.zz")), None);
        assert_eq!(row.payload_field(&path("a.b.c")), None);
        // A dot names object members only; an array has none.
        assert_eq!(row.payload_field(&path("a.list.0")), None);
        assert_eq!(
            row.payload_field(&path("a.list")),
            Some(PayloadValue::Json(serde_json::json!([1])))
        );
    }

    #[test]
    fn escaped_text_and_keys_and_repeated_members() {
        let row = RowFields::new(
            "t",
            None,
            None,
            r#"{"r\u0065gion":"e\"u","dup":"first","dup":"last"}"#,
        );
        assert_eq!(
            row.payload_field(&path("region")),
            Some(PayloadValue::Text(Cow::Owned("e\"u".into())))
        );
        assert_eq!(row.payload_field(&path("dup")), text("last"));
    }

    #[test]
    fn a_payload_that_is_not_json_or_not_an_object_has_no_fields() {
        for payload in [
            "not json", "", "[1,2]", "\"text\"", "42", "null", r#"{"a":"#,
        ] {
            let row = RowFields::new("t", None, None, payload);
            assert_eq!(row.payload_field(&path("a")), None, "{payload}");
        }
    }

    #[test]
    fn the_payload_is_read_only_when_asked() {
        let row = RowFields::new("t", Some("k"), Some("Order"), r#"{"a":1}"#);
        assert_eq!(row.topic(), "t");
        assert_eq!(row.key(), Some("k"));
        assert_eq!(row.aggregate_type(), Some("Order"));
        assert_eq!(row.payload_reads(), 0);
        assert!(row.payload_field(&path("a")).is_some());
        assert_eq!(row.payload_reads(), 1);
    }

    #[test]
    fn empty_columns_are_absent() {
        let row = RowFields::new("t", Some(""), Some(""), "{}");
        assert_eq!(row.key(), None);
        assert_eq!(row.aggregate_type(), None);
    }

    #[test]
    fn values_render_as_text_or_compact_json() {
        let row = RowFields::new(
            "t",
            None,
            None,
            r#"{"s": "eu", "i": 42, "f": 2.5, "b": true, "o": {"b": [1, "x"], "a": null}}"#,
        );
        let mut out = String::new();
        for field in ["s", "i", "f", "b", "o"] {
            let value = row
                .payload_field(&path(field))
                .unwrap_or_else(|| panic!("{field}"));
            push_value(&mut out, &value);
            out.push('|');
        }
        // Member order is kept, and the spaces of the stored text are not.
        assert_eq!(out, r#"eu|42|2.5|true|{"b":[1,"x"],"a":null}|"#);
    }
}
