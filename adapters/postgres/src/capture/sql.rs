//! Every statement of capture, in one place. The checks run on the replication session itself
//! (simple query protocol, text results), so they see the server and account capture uses; the
//! state table and the wake-up notices go through the pool.
//!
//! Names reach the catalog queries as string literals. They are validated identifiers (lower case
//! letters, digits and `_`), and [`literal`] doubles any quote anyway.

/// A SQL string literal of `text`.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The server's log level.
pub(crate) const WAL_LEVEL: &str = "SELECT current_setting('wal_level')";

/// Whether publication `$name` exists and publishes inserts: one row `(pubinsert)` or none.
pub(crate) fn publication(name: &str) -> String {
    format!(
        "SELECT pubinsert FROM pg_catalog.pg_publication WHERE pubname = {}",
        literal(name)
    )
}

/// Whether the publication covers the table: one row or none.
pub(crate) fn publication_covers(publication: &str, schema: &str, table: &str) -> String {
    format!(
        "SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = {} AND schemaname = {} AND tablename = {}",
        literal(publication),
        literal(schema),
        literal(table)
    )
}

/// The slot: `(plugin, slot_type, database, confirmed_flush_lsn)` or no row.
pub(crate) fn slot(name: &str) -> String {
    format!(
        "SELECT plugin, slot_type, database, confirmed_flush_lsn::text FROM pg_catalog.pg_replication_slots WHERE slot_name = {}",
        literal(name)
    )
}

/// Creates the logical slot without exporting a snapshot (capture never reads rows from it); the
/// second column of the answer is the position the slot starts from.
pub(crate) fn create_slot(name: &str) -> String {
    format!("CREATE_REPLICATION_SLOT \"{name}\" LOGICAL pgoutput NOEXPORT_SNAPSHOT")
}

/// Moves the slot to the server's flushed log end without decoding output (a fast-forward read of
/// the log) and returns the position reached: `(end_lsn)`.
pub(crate) fn skip_to_log_end(slot: &str) -> String {
    format!(
        "SELECT end_lsn::text FROM pg_catalog.pg_replication_slot_advance({}, pg_catalog.pg_current_wal_flush_lsn())",
        literal(slot)
    )
}

/// Takes the session-level owner lock `(key)` without waiting: `t` or `f`. The lock lives as long
/// as the replication session, so a crash or a dropped connection releases it.
pub(crate) fn try_owner_lock(key: i64) -> String {
    format!("SELECT pg_try_advisory_lock({key})")
}

/// The record of an identity: `(instance_id, settings_fingerprint, log_position)`.
pub(crate) const LOAD_STATE: &str = "SELECT instance_id::text AS instance_id, settings_fingerprint, log_position FROM queuebox_capture_state WHERE identity_name = $1";

/// Creates the record of an identity ($1 identity, $2 instance, $3 fingerprint, $4 position or
/// null, $5 owner).
pub(crate) const CREATE_STATE: &str = "INSERT INTO queuebox_capture_state (identity_name, instance_id, settings_fingerprint, log_position, owner_host) VALUES ($1, $2::uuid, $3, $4, $5)";

/// Records the handled position ($1 identity, $2 position, $3 owner).
pub(crate) const RECORD_POSITION: &str = "UPDATE queuebox_capture_state SET log_position = $2, owner_host = $3, updated_at = now() WHERE identity_name = $1";

/// Bytes between the server's log end and the slot's confirmed position; no row without the slot.
pub(crate) const SLOT_LAG: &str = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::float8 AS lag FROM pg_catalog.pg_replication_slots WHERE slot_name = $1";

/// Tells the listeners of channel $1 that rows arrived, without waiting for the log flush.
///
/// A transaction that notifies gets a transaction id and so a commit record, which with the
/// server's default waits for a flush to disk: at 1,000 rows a second the owner's notices added a
/// flush for every commit it streamed, in the same disk queue as the application's commits and
/// QueueBox's finishes. A notice is only a wake-up: if a crash loses it, a follower missed a claim
/// that its next reconciliation pass makes anyway, so it need not be durable.
/// (`set_config(..., true)` is SET LOCAL: the setting ends with the statement's own transaction.)
pub const ANNOUNCE: &str =
    "SELECT pg_notify($1, ''), set_config('synchronous_commit', 'off', true)";
