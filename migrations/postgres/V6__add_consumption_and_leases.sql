-- V6: claim tokens and leases on both tables, and the pull consumption of the inbox.
--
-- UPGRADE NOTE: this version needs a FULL STOP. Workers of older releases fence a claim on a
-- timestamp, newer ones on claim_token + lease_expires_at; the two must never run together, or an
-- old worker can finish a row that a new worker owns. Stop every old replica, apply V6 and V7, then
-- start the new replicas.
--
-- Existing inbox rows become 'push' rows through the column default, which keeps their behaviour.

ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;

ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS consumption VARCHAR(4) NOT NULL DEFAULT 'push'
    CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull'));
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS last_error TEXT;

-- The relay claims push rows only; pull workers claim pull rows of one source.
CREATE INDEX IF NOT EXISTS idx_inbox_consumption_pending
    ON inbox (consumption, state, scheduled_at);
