//! Reading stream entries out of the replies of `XREADGROUP`, `XAUTOCLAIM` and `XPENDING`, keeping
//! each entry's fields in entry order (the redis crate's reply types keep them in a hash map).

use redis::Value;

/// One entry: its id, and its fields in order, or `None` when the entry was deleted from the
/// stream while it was still pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: String,
    pub fields: Option<Vec<(String, Vec<u8>)>>,
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn bytes(value: &Value) -> Vec<u8> {
    match value {
        Value::BulkString(bytes) => bytes.clone(),
        other => text(other).unwrap_or_default().into_bytes(),
    }
}

/// The entries of a list of `[id, [field, value, ...]]` pairs.
pub(crate) fn entry_list(value: &Value) -> Vec<Entry> {
    let Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let Value::Array(pair) = item else {
                return None;
            };
            let id = text(pair.first()?)?;
            let fields = match pair.get(1) {
                Some(Value::Array(flat)) => Some(
                    flat.chunks(2)
                        .filter(|c| c.len() == 2)
                        .map(|c| (text(&c[0]).unwrap_or_default(), bytes(&c[1])))
                        .collect(),
                ),
                Some(Value::Map(map)) => Some(
                    map.iter()
                        .map(|(k, v)| (text(k).unwrap_or_default(), bytes(v)))
                        .collect(),
                ),
                _ => None,
            };
            Some(Entry { id, fields })
        })
        .collect()
}

/// The entries of an `XREADGROUP` reply for one stream (`Nil` when the block ran out).
pub(crate) fn read_reply(value: &Value) -> Vec<Entry> {
    match value {
        Value::Array(streams) => streams
            .iter()
            .flat_map(|stream| match stream {
                Value::Array(pair) => pair.get(1).map(entry_list).unwrap_or_default(),
                _ => Vec::new(),
            })
            .collect(),
        Value::Map(streams) => streams.iter().flat_map(|(_, v)| entry_list(v)).collect(),
        _ => Vec::new(),
    }
}

/// The next cursor and the claimed entries of an `XAUTOCLAIM` reply.
pub(crate) fn autoclaim_reply(value: &Value) -> (String, Vec<Entry>) {
    match value {
        Value::Array(parts) => (
            parts
                .first()
                .and_then(text)
                .unwrap_or_else(|| "0-0".to_owned()),
            parts.get(1).map(entry_list).unwrap_or_default(),
        ),
        _ => ("0-0".to_owned(), Vec::new()),
    }
}

/// `(id, deliveries)` of each line of an extended `XPENDING` reply.
pub(crate) fn pending_reply(value: &Value) -> Vec<(String, u64)> {
    let Value::Array(lines) = value else {
        return Vec::new();
    };
    lines
        .iter()
        .filter_map(|line| match line {
            Value::Array(cells) => {
                let id = text(cells.first()?)?;
                let count = match cells.get(3)? {
                    Value::Int(n) => u64::try_from(*n).ok()?,
                    other => text(other)?.parse().ok()?,
                };
                Some((id, count))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn entries_keep_their_field_order_and_deleted_ones_show() {
        let reply = Value::Array(vec![Value::Array(vec![
            bulk("s"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("1-0"),
                    Value::Array(vec![bulk("b"), bulk("2"), bulk("a"), bulk("1")]),
                ]),
                Value::Array(vec![bulk("2-0"), Value::Nil]),
            ]),
        ])]);
        assert_eq!(
            read_reply(&reply),
            [
                Entry {
                    id: "1-0".into(),
                    fields: Some(vec![
                        ("b".into(), b"2".to_vec()),
                        ("a".into(), b"1".to_vec())
                    ])
                },
                Entry {
                    id: "2-0".into(),
                    fields: None
                }
            ]
        );
        assert!(read_reply(&Value::Nil).is_empty());
        let claimed = Value::Array(vec![
            bulk("5-0"),
            Value::Array(vec![]),
            Value::Array(vec![]),
        ]);
        assert_eq!(autoclaim_reply(&claimed), ("5-0".to_owned(), vec![]));
        let pending = Value::Array(vec![Value::Array(vec![
            bulk("1-0"),
            bulk("c"),
            Value::Int(10),
            Value::Int(3),
        ])]);
        assert_eq!(pending_reply(&pending), [("1-0".to_owned(), 3)]);
    }
}
