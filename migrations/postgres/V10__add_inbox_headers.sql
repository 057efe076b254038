-- V10: the received headers of an inbox message, as a JSON object of strings.
--
-- UPGRADE NOTE: QueueBox checks at start that this column exists and stops otherwise; a custom
-- inbox table must add it by hand. The pull client libraries from 0.3.0 read it. NOT NULL with a
-- default, so existing rows get an empty object and older instances keep inserting.

ALTER TABLE inbox ADD COLUMN IF NOT EXISTS headers JSONB NOT NULL DEFAULT '{}';
