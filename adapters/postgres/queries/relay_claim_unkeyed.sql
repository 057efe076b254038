-- Claims pending push rows without an aggregate (NULL or empty), oldest first. Runs under the relay
-- lock (relay_lock.sql) in the same transaction.
--
-- Such a row takes part in no order, so any of them may go. The V15 index sorts these rows last, in
-- created_at order, behind every aggregate's rows; ordering by the same three expressions lets the
-- scan start at the first of them and stop after `limit`, never passing a row of an aggregate.
-- The update reaches each locked row by its physical address (ctid), which cannot change while this
-- statement holds the row's lock: a primary-key probe per row saved. The id check keeps the match
-- exact where a ctid repeats (the partitions of a partitioned table).
-- $1 limit (int), $2 lease in milliseconds (bigint).
WITH locked AS (
    SELECT i.{inbox.id} AS id, i.ctid AS tid
      FROM {inbox} i
     WHERE i.{inbox.state} = 'pending'
       AND i.{inbox.consumption} = 'push'
       AND NULLIF(i.{inbox.aggregateId}, '') IS NULL
     ORDER BY NULLIF(i.{inbox.aggregateId}, ''), i.{inbox.createdAt}, i.{inbox.id}
     LIMIT $1
     FOR UPDATE SKIP LOCKED
)
UPDATE {inbox} t
   SET {inbox.state} = 'processing',
       {inbox.claimToken} = gen_random_uuid(),
       {inbox.claimedAt} = now(),
       {inbox.leaseExpiresAt} = now() + $2 * interval '1 millisecond'
  FROM locked
 WHERE t.ctid = locked.tid AND t.{inbox.id} = locked.id
RETURNING t.{inbox.id} AS id, t.{inbox.claimToken} AS claim_token, t.{inbox.source} AS source,
          t.{inbox.idempotencyKey} AS idempotency_key, t.{inbox.aggregateId} AS aggregate_id,
          t.{inbox.eventType} AS event_type, t.{inbox.payload}::text AS payload,
          t.{inbox.headers}::text AS headers, t.{inbox.correlationId} AS correlation_id
