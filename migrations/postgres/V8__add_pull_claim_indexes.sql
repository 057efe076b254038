-- V8: the two indexes of the pull claim.
--
-- UPGRADE NOTE: a plain CREATE INDEX blocks inserts into the inbox while it builds. On a large
-- inbox, plan a maintenance window, or build both indexes first by hand with
-- CREATE INDEX CONCURRENTLY (outside a transaction) under these exact names; this file then finds
-- them and builds nothing.

-- Pending pull rows of one source, in claim order.
CREATE INDEX IF NOT EXISTS idx_inbox_pull_pending
    ON inbox (source, scheduled_at, created_at, id)
    WHERE consumption = 'pull' AND state = 'pending';

-- Pull rows in flight, to keep one row of an aggregate claimed at a time.
CREATE INDEX IF NOT EXISTS idx_inbox_pull_busy
    ON inbox (source, aggregate_id, lease_expires_at)
    WHERE consumption = 'pull' AND state = 'processing';
