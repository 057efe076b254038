-- Whether a table, index or sequence ($1) of kind $2 (pg_class.relkind) exists in the schema the
-- unqualified migration statements create objects in.
SELECT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema()
       AND c.relname = $1
       AND c.relkind::text = ANY ($2)
)
