//! The few `pgoutput` messages capture reads: which relation id is the outbox table (`R`), and the
//! inserts (`I`), updates (`U`), deletes (`D`) and truncates (`T`) that name it. Begin and commit
//! arrive already parsed; everything else is skipped. Protocol version 1 frames each message as a
//! one-byte tag followed by big-endian fields.

/// One change message, as far as capture cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// A relation description: its id, schema and name.
    Relation {
        id: u32,
        schema: String,
        name: String,
    },
    /// A row inserted into relation `id`.
    Insert { id: u32 },
    /// A row updated or deleted in relation `id`.
    Other { id: u32 },
    /// Relations truncated.
    Truncate { ids: Vec<u32> },
    /// Anything else (type, origin, message).
    Skipped,
}

/// Reads one message. `None` when it is shorter than its tag says (never sent by a server).
pub(crate) fn parse(data: &[u8]) -> Option<Change> {
    let (&tag, rest) = data.split_first()?;
    match tag {
        b'R' => {
            let id = u32_at(rest, 0)?;
            let (schema, after) = cstring(rest.get(4..)?)?;
            let (name, _) = cstring(after)?;
            Some(Change::Relation {
                id,
                schema: schema.to_owned(),
                name: name.to_owned(),
            })
        }
        b'I' => Some(Change::Insert {
            id: u32_at(rest, 0)?,
        }),
        b'U' | b'D' => Some(Change::Other {
            id: u32_at(rest, 0)?,
        }),
        b'T' => {
            let count = u32_at(rest, 0)? as usize;
            // relation count, one option byte, then the ids.
            let ids = (0..count)
                .map(|i| u32_at(rest, 5 + 4 * i))
                .collect::<Option<Vec<_>>>()?;
            Some(Change::Truncate { ids })
        }
        _ => Some(Change::Skipped),
    }
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at + 4)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn cstring(data: &[u8]) -> Option<(&str, &[u8])> {
    let end = data.iter().position(|&b| b == 0)?;
    let text = std::str::from_utf8(&data[..end]).ok()?;
    Some((text, &data[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relation(id: u32, schema: &str, name: &str) -> Vec<u8> {
        let mut data = vec![b'R'];
        data.extend(id.to_be_bytes());
        data.extend(schema.as_bytes());
        data.push(0);
        data.extend(name.as_bytes());
        data.push(0);
        data.push(b'd'); // replica identity
        data.extend(0_u16.to_be_bytes()); // no columns
        data
    }

    #[test]
    fn a_relation_names_its_schema_and_table() {
        assert_eq!(
            parse(&relation(16384, "public", "outbox")),
            Some(Change::Relation {
                id: 16384,
                schema: "public".into(),
                name: "outbox".into()
            })
        );
    }

    #[test]
    fn inserts_updates_deletes_and_truncates_name_their_relation() {
        let mut insert = vec![b'I'];
        insert.extend(7_u32.to_be_bytes());
        insert.push(b'N');
        assert_eq!(parse(&insert), Some(Change::Insert { id: 7 }));
        let mut update = vec![b'U'];
        update.extend(9_u32.to_be_bytes());
        assert_eq!(parse(&update), Some(Change::Other { id: 9 }));
        let mut truncate = vec![b'T'];
        truncate.extend(2_u32.to_be_bytes());
        truncate.push(0);
        truncate.extend(7_u32.to_be_bytes());
        truncate.extend(8_u32.to_be_bytes());
        assert_eq!(parse(&truncate), Some(Change::Truncate { ids: vec![7, 8] }));
        assert_eq!(parse(b"Yxyz"), Some(Change::Skipped));
    }

    #[test]
    fn short_messages_are_refused() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"I\x00\x01"), None);
        assert_eq!(parse(b"R\x00\x00\x00\x01public"), None);
    }
}
