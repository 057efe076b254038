-- V1: the outbox table, which the application fills in its own transaction and the poller drains.
--
-- Later versions add the claim columns (V3, V4, V6), aggregate_type (V9) and sequence (V11).
-- Every statement is guarded (IF NOT EXISTS) so that a database whose schema was partly applied by
-- hand can be completed by QueueBox's migration runner without failing on objects that exist.
-- gen_random_uuid() is built into PostgreSQL 13 and later, so no extension is needed.

CREATE TABLE IF NOT EXISTS outbox (
    id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    topic        VARCHAR(255) NOT NULL,
    key          VARCHAR(255),
    payload      JSONB NOT NULL,
    headers      JSONB NOT NULL DEFAULT '{}',
    state        VARCHAR(50) NOT NULL DEFAULT 'pending',
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at   TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at   TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- The poller looks for due pending rows.
CREATE INDEX IF NOT EXISTS idx_outbox_pending_scheduled
    ON outbox (state, scheduled_at)
    WHERE state = 'pending';

-- Operators and the admin routes look rows up by topic.
CREATE INDEX IF NOT EXISTS idx_outbox_topic
    ON outbox (topic);
