-- V18: a QueueBox change to the documented schema (listed in features.md as a deviation).
--
-- An inbox row gets an entry in every index whose filter it matches when it is stored, and again
-- at each change of its state (the relay's claim and finish change `state`, which indexes hold, so
-- neither is a HOT update). Three indexes of V2 and V6 took entries on that path for no statement
-- QueueBox runs: each statement on the inbox was planned with and without them at a million rows;
-- two console reads used idx_inbox_source (see below), nothing used the other two.
--
-- * idx_inbox_source (V2, every row by source): the unique index uq_inbox_source_idempotency leads
--   with the same column and answers the same lookups. The console's lookup by idempotency key now
--   finds the sources by a loose scan of the unique index; its dead-row count by source filters the
--   dead rows it already reads instead of intersecting them with every row of the source.
--   Three entries a message that is relayed or pulled (stored, claimed, finished). Dropped.
-- * idx_inbox_pending (V2, pending rows by state): every statement that looks for pending rows
--   reads an index of its own (the claims' V8, V13 and V15 indexes, idx_inbox_state_created for
--   the oldest pending row). An entry for every message stored as pending, and one more each time
--   a row goes back to pending. Dropped.
-- * idx_inbox_consumption_pending (V6): despite its name it holds every row in every state, and
--   the relay and pull claims use the partial indexes made for them. Three entries a message, as
--   above. Dropped.
--
-- Measured (bench/journal/2026-12-04.md, three alternated pairs each): HTTP ingestion 3-7.5 %
-- more requests a second, the relay 7.1 % more rows a second.
--
-- Safe while older replicas run: no statement needs these indexes to work. DROP INDEX takes an
-- exclusive lock on the inbox for a moment, and waits for transactions that use the table; on a
-- busy inbox drop the three first with DROP INDEX CONCURRENTLY outside a transaction, and this
-- file then finds nothing left to do. An operator whose own queries filter the inbox by source
-- alone can keep an index of their own under another name.

DROP INDEX IF EXISTS idx_inbox_source;

DROP INDEX IF EXISTS idx_inbox_pending;

DROP INDEX IF EXISTS idx_inbox_consumption_pending;
