-- The age in seconds of the oldest pending inbox row, 0 when none; min() reads the first entry of
-- idx_inbox_state_created (state, created_at). Run at most once per inbox.relay.pendingGaugeIntervalMs.
SELECT COALESCE(EXTRACT(EPOCH FROM (now() - min({inbox.createdAt}))), 0)::float8 AS age_seconds
  FROM {inbox}
 WHERE {inbox.state} = 'pending'
