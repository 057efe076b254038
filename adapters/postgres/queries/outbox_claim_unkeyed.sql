-- Claims due rows without a key (NULL or empty): they take part in no order, so any due row may go.
-- The partial index of migration V12 holds exactly these rows, so the scan never passes keyed rows.
-- $1 limit (int), $2 lease in milliseconds (bigint)
WITH locked AS (
    SELECT o.{outbox.id} AS id, o.ctid AS tid
      FROM {outbox} o
     WHERE o.{outbox.state} = 'pending'
       AND (o.{outbox.key} IS NULL OR o.{outbox.key} = '')
       AND o.{outbox.scheduledAt} <= now()
     ORDER BY o.{outbox.scheduledAt}
     LIMIT $1
     FOR UPDATE SKIP LOCKED
)
-- The update reaches each locked row by its physical address (ctid), which cannot change while this
-- statement holds the row's lock: a primary-key probe per row saved. The id check keeps the match
-- exact where a ctid repeats (the partitions of a partitioned table).
UPDATE {outbox} t
   SET {outbox.state} = 'processing',
       {outbox.claimToken} = gen_random_uuid(),
       {outbox.claimedAt} = now(),
       {outbox.leaseExpiresAt} = now() + $2 * interval '1 millisecond',
       {outbox.updatedAt} = now()
  FROM locked
 WHERE t.ctid = locked.tid AND t.{outbox.id} = locked.id
RETURNING t.{outbox.id} AS id, t.{outbox.claimToken} AS claim_token, t.{outbox.topic} AS topic,
          t.{outbox.key} AS key, t.{outbox.aggregateType} AS aggregate_type,
          t.{outbox.payload}::text AS payload, t.{outbox.headers}::text AS headers,
          t.{outbox.attempt} AS attempt, t.{outbox.maxAttempts} AS max_attempts,
          t.{outbox.sequence} AS sequence,
          floor(extract(epoch FROM t.{outbox.createdAt}) * 1000)::bigint AS created_at_ms
