-- V15: a QueueBox addition beyond the eleven documented versions (listed in features.md).
--
-- The relay claim (adapters/postgres/queries/relay_claim_keyed.sql and relay_claim_unkeyed.sql)
-- walks the pending push rows aggregate by aggregate, taking each aggregate's oldest row, and takes
-- rows without an aggregate oldest first. This index holds exactly the pending push rows in that
-- order: by aggregate (an empty aggregate counts as none, so those rows sort with the NULLs, last),
-- then created_at and id. Each step of the walk is then one index probe, so a claim costs
-- O(batch) however the backlog is laid out; a burst of one aggregate's rows is one step, not a
-- window of rows to read past. Without it the claim returns the same rows, only slower.
--
-- Safe to apply while old replicas run: it adds an index and nothing else. On a large inbox, build it
-- first with CREATE INDEX CONCURRENTLY outside a transaction; this file then finds it.

CREATE INDEX IF NOT EXISTS idx_inbox_push_pending_aggregate
    ON inbox ((NULLIF(aggregate_id, '')), created_at, id)
    WHERE consumption = 'push' AND state = 'pending';
