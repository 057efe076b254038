-- ping
SELECT 1;

-- table_columns
SELECT to_regclass($1) IS NOT NULL AS table_found,
       ARRAY(SELECT a.attname::text
               FROM pg_catalog.pg_attribute AS a
              WHERE a.attrelid = to_regclass($1)
                AND a.attnum > 0
                AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns;

-- insert_outbox
INSERT INTO "qb_outbox" (
    "id",
    "topic",
    "key",
    "aggregate_type",
    "body",
    "headers",
    "max_attempts",
    "scheduled_at"
)
VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, CURRENT_TIMESTAMP))
RETURNING "id", "sequence";

-- insert_inbox
INSERT INTO "qb_inbox" (
    "id",
    "source",
    "dedup_key",
    "aggregate_id",
    "event_type",
    "payload",
    "headers",
    "correlation_id",
    "consumption"
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT DO NOTHING
RETURNING "id";

