-- V9: the kind of business entity of an outbox row; broker destinations can build their address
-- from it. Nullable: safe for a rolling upgrade.

ALTER TABLE outbox ADD COLUMN IF NOT EXISTS aggregate_type VARCHAR(255);
