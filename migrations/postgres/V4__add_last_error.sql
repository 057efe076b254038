-- V4: the reason of the last failed delivery of an outbox row (secrets removed, length capped by
-- the writer). Nullable: safe for a rolling upgrade.

ALTER TABLE outbox ADD COLUMN IF NOT EXISTS last_error TEXT;
