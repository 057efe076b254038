-- Console: one inbox row by primary key, the payload cut to $2 characters.
-- $1 id, $2 payload characters
SELECT i.{inbox.id} AS id, i.{inbox.source} AS grp, i.{inbox.idempotencyKey} AS key,
       i.{inbox.state} AS state, i.{inbox.attempt} AS attempt, i.{inbox.lastError} AS last_error,
       i.{inbox.createdAt} AS created_at, i.{inbox.createdAt} AS changed_at,
       i.{inbox.headers}::text AS headers, left(i.{inbox.payload}::text, $2) AS payload,
       octet_length(i.{inbox.payload}::text)::int8 AS payload_bytes,
       i.{inbox.eventType} AS kind, i.{inbox.consumption}::text AS consumption,
       i.{inbox.correlationId}::text AS correlation_id
  FROM {inbox} i
 WHERE i.{inbox.id} = $1::uuid
