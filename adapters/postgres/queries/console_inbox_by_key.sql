-- Console lookup: the inbox rows with one idempotency key. The unique index (source,
-- idempotency_key) leads with the source, so the sources are found first by a loose scan of that
-- same index (one probe per distinct source; V18 dropped idx_inbox_source, which served it before)
-- and the key is then one probe per source.
-- $1 idempotency key
WITH RECURSIVE sources(name) AS (
    SELECT min(i.{inbox.source}) FROM {inbox} i
    UNION ALL
    SELECT (SELECT min(i.{inbox.source}) FROM {inbox} i WHERE i.{inbox.source} > s.name)
      FROM sources s
     WHERE s.name IS NOT NULL
)
SELECT i.{inbox.id} AS id, i.{inbox.source} AS grp, i.{inbox.idempotencyKey} AS key,
       i.{inbox.state} AS state, i.{inbox.attempt} AS attempt, i.{inbox.lastError} AS last_error,
       i.{inbox.createdAt} AS created_at, i.{inbox.createdAt} AS changed_at
  FROM {inbox} i
 WHERE i.{inbox.source} = ANY(ARRAY(SELECT name FROM sources WHERE name IS NOT NULL))
   AND i.{inbox.idempotencyKey} = $1::text
