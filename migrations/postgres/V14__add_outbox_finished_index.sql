-- V14: a QueueBox addition beyond the eleven documented versions (listed in features.md).
--
-- Retention deletes sent and dead outbox rows by their last change (the AGE policy) and keeps the most
-- recently changed ones of each state (the COUNT policy). Without an index of exactly those rows each
-- delete batch scans the whole outbox, so a cleanup costs O(table) per batch. This partial index makes
-- each batch a range scan that stops after batchSize rows. It holds finished rows only, so the claim
-- and the pending indexes are untouched; its price is one index entry per finished row. A custom
-- outbox table may add the same index under its own names; without it retention still works, only
-- slower on a large table.
--
-- Safe to apply while old replicas run: it adds an index and nothing else. On a large outbox, build it
-- first with CREATE INDEX CONCURRENTLY outside a transaction; this file then finds it.

CREATE INDEX IF NOT EXISTS idx_outbox_finished_updated
    ON outbox (state, updated_at, id)
    WHERE state IN ('sent', 'dead');
