-- The schema guard: whether a table resolves the way every other statement resolves it (through
-- search_path), and its column names. $1 is the double-quoted table name, so a mixed-case name is
-- looked up exactly as the quoted statements use it.
SELECT to_regclass($1) IS NOT NULL AS table_found,
       ARRAY(SELECT a.attname::text
               FROM pg_catalog.pg_attribute AS a
              WHERE a.attrelid = to_regclass($1)
                AND a.attnum > 0
                AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns
