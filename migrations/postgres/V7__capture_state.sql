-- V7: the state of change data capture, one row per capture identity.
--
-- Capture keeps its log position in files of a durable state directory; this row lets a start
-- compare those files with what the database remembers, so a lost volume, files of another
-- instance or changed capture settings stop capture instead of silently replaying or skipping log
-- positions. Apply it together with V6 (same full stop). The table name is fixed: a custom schema
-- creates it under this name too.
--
--   identity_name        outbox.capture.identity, the name of the capture owner (the primary key;
--                        an operator resets capture with DELETE ... WHERE identity_name = '...').
--   instance_id          the identifier written to the `identity` file of the state directory.
--   settings_fingerprint a digest of what makes a position meaningful: mode, host, database,
--                        schema, table, slot and publication.
--   log_position         the last handled log position as text (a PostgreSQL LSN such as
--                        0/16B3748, or a SQL Server LSN), null until capture records one.
--   owner_host           the host (and process) that last owned the identity, for diagnostics.

CREATE TABLE IF NOT EXISTS queuebox_capture_state (
    identity_name        VARCHAR(255) PRIMARY KEY,
    instance_id          UUID NOT NULL,
    settings_fingerprint VARCHAR(128) NOT NULL,
    log_position         TEXT,
    owner_host           VARCHAR(255),
    created_at           TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at           TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);
