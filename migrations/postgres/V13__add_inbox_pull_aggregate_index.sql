-- V13: a QueueBox addition beyond the eleven documented versions (listed in features.md).
--
-- The pull claim (examples/pull/sql/postgresql/claim.sql and the pull client libraries) walks the
-- pending pull rows of one source aggregate by aggregate, taking each aggregate's first row. This index
-- holds exactly those rows in that order, so each step of the walk is one index probe and one busy
-- aggregate at the head of a source cannot hold back the others. Without it the claim still returns
-- the right rows, only slower on a large backlog.
--
-- Safe to apply while old replicas and pull workers run: it adds an index and nothing else. On a large
-- inbox, build it first with CREATE INDEX CONCURRENTLY outside a transaction; this file then finds it.

CREATE INDEX IF NOT EXISTS idx_inbox_pull_aggregate
    ON inbox (source, aggregate_id, scheduled_at, created_at, id)
    WHERE consumption = 'pull' AND state = 'pending';
