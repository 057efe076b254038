-- V5: the correlation identifier that follows an inbox message through every log line.
-- At most 128 characters (the receiver truncates). Nullable: safe for a rolling upgrade.

ALTER TABLE inbox ADD COLUMN IF NOT EXISTS correlation_id VARCHAR(128);
