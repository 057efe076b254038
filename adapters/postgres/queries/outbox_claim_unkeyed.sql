-- Claims due rows without a key (NULL or empty): they take part in no order, so any due row may go.
-- The partial index of migration V12 holds exactly these rows, so the scan never passes keyed rows.
-- $1 limit (int), $2 lease in milliseconds (bigint)
--
-- Every claim statement (this one, outbox_claim_keyed.sql, outbox_claim_released.sql) commits without
-- waiting for its WAL flush: the one-time filter below runs set_config(..., true), which is SET LOCAL
-- for the statement's own transaction, before the first row is read. Why that is safe: a claim only
-- moves rows from pending to processing under a new token. A crash that loses it leaves them pending,
-- as if it never ran; a publish made from it is then made again by a later claim, the duplicate
-- at-least-once delivery allows after a crash, and its finish fails the fence and counts as a lost
-- claim. Nothing durable can depend on a lost claim: every finish commits with an ordinary flush,
-- which carries all earlier WAL, the claim's included, and the next row of a key is claimable only
-- once its head's finish has committed. What it saves: the claim's rows go to the publishers without
-- waiting for the disk, which on the bench machine took 0.5 ms at the median and up to 24 ms.
WITH locked AS (
    SELECT o.{outbox.id} AS id, o.ctid AS tid
      FROM {outbox} o
     WHERE o.{outbox.state} = 'pending'
       AND (o.{outbox.key} IS NULL OR o.{outbox.key} = '')
       AND o.{outbox.scheduledAt} <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
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
