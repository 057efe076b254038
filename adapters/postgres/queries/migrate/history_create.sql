-- The schema history of the bundled migrations (QueueBox's replacement for Flyway's table).
-- how = 'applied' when the runner executed the file, 'baselined' when it found the objects of the
-- version already present (a schema applied by hand) and only recorded it.
CREATE TABLE IF NOT EXISTS queuebox_schema_history (
    version      INTEGER PRIMARY KEY,
    description  VARCHAR(200) NOT NULL,
    script       VARCHAR(1000) NOT NULL,
    checksum     VARCHAR(64) NOT NULL,
    how          VARCHAR(16) NOT NULL CHECK (how IN ('applied', 'baselined')),
    applied_by   VARCHAR(100) NOT NULL DEFAULT current_user,
    applied_at   TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    execution_ms INTEGER NOT NULL DEFAULT 0
)
