//! Helpers every PostgreSQL store shares: error mapping onto the port error, per-input results of a
//! batched fenced statement, the headers column, and values PostgreSQL can store.

use crate::error::PostgresError;
use queuebox_ports::outbox::StoreError;
use sqlx::Row;
use sqlx::postgres::PgRow;
use std::time::Duration;

/// The stored `headers` object as (name, value) pairs in stored order. The column should hold
/// strings; another scalar travels as its JSON text, a null is dropped, and a column that is not an
/// object yields no headers rather than a row that cannot be delivered or forwarded.
pub(crate) fn header_pairs(text: &str) -> Vec<(String, String)> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter_map(|(name, value)| match value {
                serde_json::Value::String(s) => Some((name, s)),
                serde_json::Value::Null => None,
                other => Some((name, other.to_string())),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Per input, whether it applied, from the 1-based positions a batched statement returned (by
/// position, not id, so two writes of one row in a batch are told apart).
pub(crate) fn applied_positions(inputs: usize, positions: &[i64]) -> Vec<bool> {
    let mut applied = vec![false; inputs];
    for position in positions {
        let slot = usize::try_from(*position)
            .ok()
            .and_then(|p| p.checked_sub(1))
            .and_then(|index| applied.get_mut(index));
        if let Some(slot) = slot {
            *slot = true;
        }
    }
    applied
}

/// `text` as PostgreSQL can store it: a text value cannot hold NUL, and a failure reason quoting a
/// receiver's binary answer can carry one. Stored verbatim it would fail the whole batch, so NULs are
/// dropped.
pub(crate) fn storable_text(text: &str) -> String {
    text.replace('\0', "")
}

/// A row count for an `int` bind parameter (LIMIT and the like), saturating rather than wrapping
/// to a negative number.
pub(crate) fn sql_limit(limit: u32) -> i32 {
    i32::try_from(limit).unwrap_or(i32::MAX)
}

/// A duration as whole milliseconds for a bind parameter, saturating.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A failure to get a pooled connection, as the port reports it.
pub(crate) fn pool_error(operation: &'static str, error: PostgresError) -> StoreError {
    StoreError {
        operation,
        reason: error.to_string(),
    }
}

/// A failed statement, as the port reports it.
pub(crate) fn store_error(operation: &'static str, error: sqlx::Error) -> StoreError {
    StoreError {
        operation,
        reason: error.to_string(),
    }
}

/// Where the next walk of a key-walk claim (outbox keys, relay aggregates) starts, from the walk's
/// end that the statement reports on each row (`last_key`, `walked`, `ready`): after the last key
/// when the walk stopped early (`limit` ready heads, or `bound` keys walked), so the rotation moves
/// on; from the first key ('') when it ran out of keys.
pub(crate) fn next_walk_cursor(
    row: &PgRow,
    limit: u32,
    bound: i32,
    operation: &'static str,
) -> Result<String, StoreError> {
    let last_key: Option<String> = row
        .try_get("last_key")
        .map_err(|e| store_error(operation, e))?;
    let walked: i32 = row
        .try_get("walked")
        .map_err(|e| store_error(operation, e))?;
    let ready: i32 = row
        .try_get("ready")
        .map_err(|e| store_error(operation, e))?;
    let limit = sql_limit(limit);
    Ok(if ready >= limit || walked >= bound {
        last_key.unwrap_or_default()
    } else {
        String::new()
    })
}

/// Decodes the answer of a key-walk claim: every row reports the walk's end, and the rows that carry an
/// `id` are the claimed rows, pushed onto `rows` with `decode`. Returns where the next walk starts.
pub(crate) fn decode_walk_claim<T>(
    result: &[PgRow],
    limit: u32,
    bound: i32,
    operation: &'static str,
    decode: impl Fn(&PgRow) -> Result<T, StoreError>,
    rows: &mut Vec<T>,
) -> Result<String, StoreError> {
    let mut next_cursor = String::new();
    for row in result {
        next_cursor = next_walk_cursor(row, limit, bound, operation)?;
        let id: Option<uuid::Uuid> = row.try_get("id").map_err(|e| store_error(operation, e))?;
        if id.is_some() {
            rows.push(decode(row)?);
        }
    }
    Ok(next_cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_keep_their_order_and_stringify_scalars() {
        assert_eq!(
            header_pairs(r#"{"X-B":"2","X-A":"1","X-N":3,"X-Null":null}"#),
            vec![
                ("X-B".to_owned(), "2".to_owned()),
                ("X-A".to_owned(), "1".to_owned()),
                ("X-N".to_owned(), "3".to_owned())
            ]
        );
        assert!(header_pairs("[]").is_empty());
        assert!(header_pairs("not json").is_empty());
    }

    #[test]
    fn positions_map_back_to_inputs() {
        assert_eq!(
            applied_positions(4, &[1, 3, 9, 0, -2]),
            vec![true, false, true, false]
        );
    }

    #[test]
    fn a_limit_beyond_int_saturates_instead_of_turning_negative() {
        assert_eq!(sql_limit(500), 500);
        assert_eq!(sql_limit(u32::MAX), i32::MAX);
    }

    #[test]
    fn nul_bytes_are_dropped() {
        assert_eq!(storable_text("a\0b"), "ab");
    }
}
