-- The index that the claim's aggregate walk jumps through: pending pull rows of a source, by
-- aggregate, in claim order inside each aggregate. Without it the claim returns the same rows, but
-- each jump may scan instead of probing, so a claim costs O(backlog) instead of O(aggregates seen).
-- On a large inbox build it by hand first with CREATE INDEX CONCURRENTLY under this name.
CREATE INDEX IF NOT EXISTS idx_inbox_pull_aggregate
    ON inbox (source, aggregate_id, scheduled_at, created_at, id)
    WHERE consumption = 'pull' AND state = 'pending';
