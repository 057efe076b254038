-- V12: a QueueBox addition beyond the eleven documented versions (listed in features.md).
--
-- Rows without a key (NULL or empty) take part in no order, so the claim takes any due one of them.
-- Without an index of exactly those rows, finding them means stepping over every pending keyed row
-- in idx_outbox_pending_scheduled, which costs O(backlog) once keyed rows dominate. This partial index
-- keeps that claim O(batch). It changes no column: a custom outbox table may add the same index under
-- its own names; without it the claim still works, only slower on a large keyed backlog.
--
-- Safe to apply while old replicas run: it adds an index and nothing else.

CREATE INDEX IF NOT EXISTS idx_outbox_unkeyed_pending
    ON outbox (scheduled_at)
    WHERE state = 'pending' AND (key IS NULL OR key = '');
