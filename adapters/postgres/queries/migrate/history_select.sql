SELECT version, checksum FROM queuebox_schema_history ORDER BY version
