//! A delivery as the ingest pipeline reads it: the AMQP header table as text pairs, the body, and
//! the `message_id` and `correlation_id` properties.
//!
//! Each header becomes one `(name, text)` pair:
//! - long strings and byte arrays: their bytes when they are UTF-8 without U+0000, otherwise
//!   `base64:` and the standard Base64 of the bytes (AMQP long strings are byte strings, and this
//!   keeps every byte);
//! - short strings: as they are;
//! - booleans: `true` / `false`;
//! - integers of every width and timestamps (seconds since the epoch): decimal digits;
//! - floats and doubles: Rust's shortest round-trip form (`1.5`, `NaN`, `inf`);
//! - decimals: the scaled value in plain notation (`12.50` for value 1250, scale 2);
//! - tables (such as RabbitMQ's `x-death`) and arrays: compact JSON text of the structure, whose
//!   members and elements are JSON values by [`json_value`];
//! - void: left out (it carries no value).
//!
//! An AMQP header table is a map, so the pairs come in header-name order, not the order the
//! publisher wrote them; a table's members come out in name order too.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, DecimalValue, FieldArray, FieldTable};
use queuebox_domain::inbox::headers::header_text;
use queuebox_ports::ingest::Received;
use serde_json::Value;

/// The [`Received`] of a delivery with `properties` and `body`.
pub(crate) fn received(properties: &BasicProperties, body: Vec<u8>) -> Received {
    let headers = properties
        .headers()
        .as_ref()
        .map(headers)
        .unwrap_or_default();
    let mut received = Received::new(headers, body);
    received.message_id = properties
        .message_id()
        .as_ref()
        .map(|id| id.as_str().to_owned());
    received.correlation_id = properties
        .correlation_id()
        .as_ref()
        .map(|id| id.as_str().to_owned());
    received
}

/// The header table as `(name, value)` text pairs (see the module doc for the rules).
pub(crate) fn headers(table: &FieldTable) -> Vec<(String, String)> {
    table
        .into_iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), header_value(value)?)))
        .collect()
}

/// The stored text of one header value; `None` for void.
fn header_value(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::LongString(text) => header_text(text.as_bytes()),
        AMQPValue::ByteArray(bytes) => header_text(bytes.as_slice()),
        AMQPValue::ShortString(text) => text.as_str().to_owned(),
        AMQPValue::Boolean(flag) => flag.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Timestamp(n) => n.to_string(),
        AMQPValue::Float(n) => n.to_string(),
        AMQPValue::Double(n) => n.to_string(),
        AMQPValue::DecimalValue(decimal) => decimal_text(*decimal),
        AMQPValue::FieldTable(table) => table_json(table).to_string(),
        AMQPValue::FieldArray(array) => array_json(array).to_string(),
        AMQPValue::Void => return None,
    })
}

/// A value inside a table or an array as JSON:
/// - integers, timestamps (seconds since the epoch), decimals and finite floats: numbers (a
///   decimal as the nearest double, which prints its digits back);
/// - a float that is not finite: its text (`"NaN"`, `"inf"`), since JSON has no such number;
/// - booleans: booleans; void: `null`;
/// - strings and byte arrays: strings, by the same rule as a header value (UTF-8 text, else
///   `"base64:..."`);
/// - tables and arrays: objects and arrays, to any depth.
fn json_value(value: &AMQPValue) -> Value {
    match value {
        AMQPValue::Boolean(flag) => Value::Bool(*flag),
        AMQPValue::ShortShortInt(n) => Value::from(*n),
        AMQPValue::ShortShortUInt(n) => Value::from(*n),
        AMQPValue::ShortInt(n) => Value::from(*n),
        AMQPValue::ShortUInt(n) => Value::from(*n),
        AMQPValue::LongInt(n) => Value::from(*n),
        AMQPValue::LongUInt(n) => Value::from(*n),
        AMQPValue::LongLongInt(n) => Value::from(*n),
        AMQPValue::Timestamp(n) => Value::from(*n),
        AMQPValue::Float(n) => float_json(f64::from(*n), n.to_string()),
        AMQPValue::Double(n) => float_json(*n, n.to_string()),
        AMQPValue::DecimalValue(decimal) => {
            let text = decimal_text(*decimal);
            serde_json::from_str::<serde_json::Number>(&text)
                .map_or(Value::String(text), Value::Number)
        }
        AMQPValue::LongString(text) => Value::String(header_text(text.as_bytes())),
        AMQPValue::ByteArray(bytes) => Value::String(header_text(bytes.as_slice())),
        AMQPValue::ShortString(text) => Value::String(text.as_str().to_owned()),
        AMQPValue::FieldTable(table) => table_json(table),
        AMQPValue::FieldArray(array) => array_json(array),
        AMQPValue::Void => Value::Null,
    }
}

fn table_json(table: &FieldTable) -> Value {
    Value::Object(
        table
            .into_iter()
            .map(|(name, value)| (name.as_str().to_owned(), json_value(value)))
            .collect(),
    )
}

fn array_json(array: &FieldArray) -> Value {
    Value::Array(array.as_slice().iter().map(json_value).collect())
}

/// A finite float as a JSON number, anything else as `text`.
fn float_json(n: f64, text: String) -> Value {
    serde_json::Number::from_f64(n).map_or(Value::String(text), Value::Number)
}

/// `value / 10^scale` in plain notation, exactly (no float rounding).
fn decimal_text(decimal: DecimalValue) -> String {
    let digits = decimal.value.to_string();
    let scale = usize::from(decimal.scale);
    if scale == 0 {
        return digits;
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{whole}.{fraction}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{ByteArray, FieldArray, LongString, ShortString};

    fn table(entries: Vec<(&str, AMQPValue)>) -> FieldTable {
        let mut table = FieldTable::default();
        for (name, value) in entries {
            table.insert(ShortString::from(name), value);
        }
        table
    }

    #[test]
    fn scalars_become_text_binary_becomes_base64_and_structures_json() {
        let mut array = FieldArray::default();
        array.push(AMQPValue::LongString(LongString::from("a")));
        array.push(AMQPValue::LongInt(2));
        array.push(AMQPValue::FieldTable(FieldTable::default()));
        let pairs = headers(&table(vec![
            ("x-string", AMQPValue::LongString(LongString::from("acme"))),
            (
                "x-binary-string",
                AMQPValue::LongString(LongString::from(vec![0xff_u8, 0x00])),
            ),
            ("x-short", AMQPValue::ShortString(ShortString::from("s"))),
            ("x-bool", AMQPValue::Boolean(true)),
            ("x-i8", AMQPValue::ShortShortInt(-8)),
            ("x-u64", AMQPValue::LongLongInt(9_007_199_254_740_993)),
            ("x-double", AMQPValue::Double(1.5)),
            ("x-ts", AMQPValue::Timestamp(1_700_000_000)),
            (
                "x-decimal",
                AMQPValue::DecimalValue(DecimalValue {
                    scale: 2,
                    value: 1250,
                }),
            ),
            (
                "x-small-decimal",
                AMQPValue::DecimalValue(DecimalValue { scale: 3, value: 5 }),
            ),
            (
                "x-bytes",
                AMQPValue::ByteArray(ByteArray::from(b"text".to_vec())),
            ),
            (
                "x-binary",
                AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0xfe])),
            ),
            ("x-list", AMQPValue::FieldArray(array)),
            ("x-empty", AMQPValue::FieldTable(FieldTable::default())),
            ("x-void", AMQPValue::Void),
        ]));
        let expected: Vec<(String, String)> = [
            ("x-binary", "base64://4="),
            ("x-binary-string", "base64:/wA="),
            ("x-bool", "true"),
            ("x-bytes", "text"),
            ("x-decimal", "12.50"),
            ("x-double", "1.5"),
            ("x-empty", "{}"),
            ("x-i8", "-8"),
            ("x-list", r#"["a",2,{}]"#),
            ("x-short", "s"),
            ("x-small-decimal", "0.005"),
            ("x-string", "acme"),
            ("x-ts", "1700000000"),
            ("x-u64", "9007199254740993"),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(pairs, expected);
    }

    #[test]
    fn values_inside_a_table_are_json_values_to_any_depth() {
        let mut queues = FieldArray::default();
        queues.push(AMQPValue::LongString(LongString::from("orders")));
        let mut death = table(vec![
            ("count", AMQPValue::LongLongInt(3)),
            ("queue", AMQPValue::LongString(LongString::from("orders"))),
            (
                "reason",
                AMQPValue::ShortString(ShortString::from("rejected")),
            ),
            ("time", AMQPValue::Timestamp(1_700_000_000)),
            ("redelivered", AMQPValue::Boolean(false)),
            ("ratio", AMQPValue::Double(0.25)),
            ("nan", AMQPValue::Float(f32::NAN)),
            (
                "price",
                AMQPValue::DecimalValue(DecimalValue {
                    scale: 2,
                    value: 1250,
                }),
            ),
            (
                "blob",
                AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0xfe])),
            ),
            (
                "note",
                AMQPValue::ByteArray(ByteArray::from(b"hi".to_vec())),
            ),
            ("nothing", AMQPValue::Void),
            ("routing-keys", AMQPValue::FieldArray(queues)),
        ]);
        death.insert(
            ShortString::from("inner"),
            AMQPValue::FieldTable(table(vec![("depth", AMQPValue::ShortInt(2))])),
        );
        let mut deaths = FieldArray::default();
        deaths.push(AMQPValue::FieldTable(death));
        let pairs = headers(&table(vec![("x-death", AMQPValue::FieldArray(deaths))]));
        assert_eq!(pairs.len(), 1);
        let stored: Value = serde_json::from_str(&pairs[0].1).expect("JSON text");
        assert_eq!(
            stored,
            serde_json::json!([{
                "blob": "base64://4=",
                "count": 3,
                "inner": {"depth": 2},
                "nan": "NaN",
                "note": "hi",
                "nothing": null,
                "price": 12.5,
                "queue": "orders",
                "ratio": 0.25,
                "reason": "rejected",
                "redelivered": false,
                "routing-keys": ["orders"],
                "time": 1_700_000_000
            }])
        );
    }

    #[test]
    fn the_message_id_and_correlation_id_properties_and_the_body_are_carried() {
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from("m-1"))
            .with_headers(table(vec![(
                "x-tenant",
                AMQPValue::LongString(LongString::from("acme")),
            )]));
        let received = received(
            &properties.with_correlation_id(ShortString::from("corr-7")),
            b"{}".to_vec(),
        );
        assert_eq!(received.message_id.as_deref(), Some("m-1"));
        assert_eq!(received.correlation_id.as_deref(), Some("corr-7"));
        assert_eq!(received.body, b"{}");
        assert_eq!(
            received.headers,
            [("x-tenant".to_owned(), "acme".to_owned())]
        );
        assert_eq!(received.record_key, None);

        let bare = super::received(&BasicProperties::default(), Vec::new());
        assert_eq!(bare.message_id, None);
        assert_eq!(bare.correlation_id, None);
        assert!(bare.headers.is_empty());
    }
}
