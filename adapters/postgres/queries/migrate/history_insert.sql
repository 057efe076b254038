INSERT INTO queuebox_schema_history (version, description, script, checksum, how, execution_ms)
VALUES ($1, $2, $3, $4, $5, $6)
