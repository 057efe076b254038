//! A delivery as the ingest pipeline reads it: the AMQP header table as text pairs, the body,
//! and the `message_id` property.
//!
//! Header values become text this way:
//! - long and short strings: their bytes as UTF-8 (an invalid sequence becomes U+FFFD);
//! - booleans: `true` / `false`;
//! - integers of every width and timestamps (seconds since the epoch): decimal digits;
//! - floats and doubles: Rust's shortest round-trip form (`1.5`, `NaN`, `inf`);
//! - decimals: the scaled value in plain notation (`12.50` for value 1250, scale 2);
//! - byte arrays: their bytes when they are UTF-8, otherwise the header is left out;
//! - arrays: one pair per scalar element under the same name (the port's "a repeated name
//!   appears once per value"); nested arrays and tables inside are left out;
//! - tables (such as the entries of RabbitMQ's `x-death`) and void values: left out. No
//!   configured rule (filter, attribute headers) can match a table, and a text rendering would
//!   invent a format nobody documented.
//!
//! An AMQP header table is a map, so the pairs come in header-name order, not the order the
//! publisher wrote them.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, DecimalValue, FieldTable};
use queuebox_ports::ingest::Received;

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
    received
}

/// The header table as `(name, value)` text pairs (see the module doc for the rules).
pub(crate) fn headers(table: &FieldTable) -> Vec<(String, String)> {
    let mut pairs = Vec::with_capacity(table.inner().len());
    for (name, value) in table {
        let name = name.as_str();
        match value {
            AMQPValue::FieldArray(array) => {
                for element in array.as_slice() {
                    if let Some(text) = scalar_text(element) {
                        pairs.push((name.to_owned(), text));
                    }
                }
            }
            other => {
                if let Some(text) = scalar_text(other) {
                    pairs.push((name.to_owned(), text));
                }
            }
        }
    }
    pairs
}

/// The text of a scalar value; `None` for tables, arrays, void and non-UTF-8 byte arrays.
fn scalar_text(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::LongString(text) => String::from_utf8_lossy(text.as_bytes()).into_owned(),
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
        AMQPValue::ByteArray(bytes) => std::str::from_utf8(bytes.as_slice()).ok()?.to_owned(),
        AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_) | AMQPValue::Void => return None,
    })
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
    fn scalars_become_text_and_structures_are_left_out() {
        let mut array = FieldArray::default();
        array.push(AMQPValue::LongString(LongString::from("a")));
        array.push(AMQPValue::LongInt(2));
        array.push(AMQPValue::FieldTable(FieldTable::default()));
        let pairs = headers(&table(vec![
            ("x-string", AMQPValue::LongString(LongString::from("acme"))),
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
            ("x-death", AMQPValue::FieldTable(FieldTable::default())),
            ("x-void", AMQPValue::Void),
        ]));
        let expected: Vec<(String, String)> = [
            ("x-bool", "true"),
            ("x-bytes", "text"),
            ("x-decimal", "12.50"),
            ("x-double", "1.5"),
            ("x-i8", "-8"),
            ("x-list", "a"),
            ("x-list", "2"),
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
    fn the_message_id_property_and_the_body_are_carried() {
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from("m-1"))
            .with_headers(table(vec![(
                "x-tenant",
                AMQPValue::LongString(LongString::from("acme")),
            )]));
        let received = received(&properties, b"{}".to_vec());
        assert_eq!(received.message_id.as_deref(), Some("m-1"));
        assert_eq!(received.body, b"{}");
        assert_eq!(
            received.headers,
            [("x-tenant".to_owned(), "acme".to_owned())]
        );
        assert_eq!(received.record_key, None);

        let bare = super::received(&BasicProperties::default(), Vec::new());
        assert_eq!(bare.message_id, None);
        assert!(bare.headers.is_empty());
    }
}
