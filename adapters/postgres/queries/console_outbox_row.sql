-- Console: one outbox row by primary key, the payload cut to $2 characters.
-- $1 id, $2 payload characters
SELECT o.{outbox.id} AS id, o.{outbox.topic} AS grp, o.{outbox.key} AS key,
       o.{outbox.state} AS state, o.{outbox.attempt} AS attempt, o.{outbox.lastError} AS last_error,
       o.{outbox.createdAt} AS created_at, o.{outbox.updatedAt} AS changed_at,
       o.{outbox.headers}::text AS headers, left(o.{outbox.payload}::text, $2) AS payload,
       octet_length(o.{outbox.payload}::text)::int8 AS payload_bytes,
       o.{outbox.aggregateType} AS kind, NULL::text AS consumption, NULL::text AS correlation_id
  FROM {outbox} o
 WHERE o.{outbox.id} = $1::uuid
