-- V3: the claim time on both tables, and the indexes the reclaim of stale claims uses.
--
-- Both columns are nullable, so an instance of the previous release keeps running against this
-- schema during a rolling upgrade.

ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;

CREATE INDEX IF NOT EXISTS idx_outbox_processing_claimed
    ON outbox (claimed_at)
    WHERE state = 'processing';

CREATE INDEX IF NOT EXISTS idx_inbox_processing_claimed
    ON inbox (claimed_at)
    WHERE state = 'processing';
