-- Prepares a database for PostgreSQL logical capture. Run it as the owner of the outbox table
-- (here `queuebox`), after QueueBox created its tables (`queuebox migrate`, or one start):
--
--   PGPASSWORD=queuebox psql -h 127.0.0.1 -U queuebox -d queuebox -v ON_ERROR_STOP=1 \
--     -f examples/cdc/setup.sql
--
-- Two things this file cannot do, because they need a superuser:
--
-- * wal_level = logical. It is a server setting (postgresql.conf or ALTER SYSTEM) that takes effect
--   only after a server restart. scripts/services.sh writes it; a managed database calls it
--   "logical replication" or similar. QueueBox checks it at start and reports the current level.
--
-- * An account with the REPLICATION attribute, which is what may open a replication session and
--   create the slot. The example's capture account is created by scripts/services.sh as
--       CREATE ROLE queuebox_capture LOGIN REPLICATION PASSWORD '...';
--   and needs nothing else in the database. QueueBox could also capture as `queuebox` if that role
--   had the attribute; a separate account keeps the delivery account unprivileged.

-- Fail early, with the reason, on a server that cannot stream changes.
DO $$
BEGIN
    IF current_setting('wal_level') <> 'logical' THEN
        RAISE EXCEPTION 'wal_level is %, capture needs logical (set it and restart PostgreSQL)',
            current_setting('wal_level');
    END IF;
END
$$;

-- The publication: the list of tables whose changes the slot hands to capture. QueueBox never
-- creates, alters or drops it (an automatic one could publish the wrong tables); it only checks at
-- start that it exists, publishes inserts and covers the outbox table. Inserts are all capture
-- reacts to, so updates and deletes are left out of the stream altogether. The name must match
-- outbox.capture.publication. Creating it needs ownership of the table. Skipped when it exists,
-- so the file can run twice.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'queuebox_outbox') THEN
        CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert');
    END IF;
END
$$;

-- The documentation also asks for SELECT on the outbox table for the capture account. The pgoutput
-- stream itself does not check it, but it lets the account read what it captures when you
-- investigate.
GRANT SELECT ON outbox TO queuebox_capture;

-- The replication slot is not created here: QueueBox creates it (outbox.capture.slot) on its first
-- start and never drops it. See docs/capture.md for retiring it.
