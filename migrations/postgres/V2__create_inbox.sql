-- V2: the inbox table, one row per accepted message of a source.
--
-- The unique constraint on (source, idempotency_key) IS the deduplication: a repeated message hits
-- it and stores no second row. Never drop it. Later versions add claim and pull columns (V3, V5,
-- V6, V10). Guarded with IF NOT EXISTS so a partly hand-applied schema can be completed.

CREATE TABLE IF NOT EXISTS inbox (
    id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    source          VARCHAR(255) NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL,
    aggregate_id    VARCHAR(255),
    event_type      VARCHAR(255),
    payload         JSONB NOT NULL,
    state           VARCHAR(50) NOT NULL DEFAULT 'pending',
    created_at      TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    processed_at    TIMESTAMP WITH TIME ZONE,
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

-- The relay looks for pending rows.
CREATE INDEX IF NOT EXISTS idx_inbox_pending
    ON inbox (state)
    WHERE state = 'pending';

-- Lookups and retention per source.
CREATE INDEX IF NOT EXISTS idx_inbox_source
    ON inbox (source);

-- The relay keeps one row of an aggregate in flight at a time.
CREATE INDEX IF NOT EXISTS idx_inbox_aggregate_state
    ON inbox (aggregate_id, state);

-- Retention deletes old rows of a state.
CREATE INDEX IF NOT EXISTS idx_inbox_state_created
    ON inbox (state, created_at);
