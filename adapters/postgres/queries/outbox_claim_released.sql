-- Claims the next row of keys whose head this replica has just finished, before the key walk runs.
--
-- Why: the walk of outbox_claim_keyed.sql visits each ready key once per rotation over all of them,
-- so a key with a long backlog (a hot key) got one row per rotation: with 20,000 ready keys, one row
-- every few seconds while the other keys drained. The replica that finished a key's head knows the
-- key is free again; this statement probes exactly those keys, one index probe each in the
-- (key, sequence) index of pending and processing rows, and claims the head it lands on when that
-- head is due and not in flight elsewhere: the same head rule as the walk, so the order per key is
-- kept. Cost O(keys given); the caller gives at most half of a claim's limit, so the walk keeps
-- moving and no other ready key waits longer for its turn than the rotation with half a batch.
--
-- $1 keys (text[]), $2 lease in milliseconds (bigint)
-- Commits without waiting for its WAL flush (the set_config filter): why that is safe is written in
-- outbox_claim_unkeyed.sql.
WITH heads AS (
    SELECT h.id, h.tid
      FROM unnest($1::text[]) AS r(k)
     CROSS JOIN LATERAL (
        SELECT o.{outbox.id} AS id, o.ctid AS tid, o.{outbox.state} AS st, o.{outbox.scheduledAt} AS due
          FROM {outbox} o
         WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} = r.k
         ORDER BY o.{outbox.key}, o.{outbox.sequence}
         LIMIT 1) h
     WHERE h.st = 'pending' AND h.due <= now()
),
-- The heads are locked through the address the probe read them at (ctid), as the walk of
-- outbox_claim_keyed.sql does, instead of a second probe of the primary key: a head updated since
-- the probe has a new address, so locking re-checks the new version, finds no match and skips it.
-- Measured on 250 keys of a 200k backlog: 4.3 ms against 4.8-6.0 with the primary-key probe. A key
-- named twice yields its head twice here; the update below still changes and returns it once.
locked AS (
    SELECT o.{outbox.id} AS id, o.ctid AS tid
      FROM heads h
      JOIN {outbox} o ON o.ctid = h.tid AND o.{outbox.id} = h.id
     WHERE o.{outbox.state} = 'pending' AND o.{outbox.scheduledAt} <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     FOR UPDATE OF o SKIP LOCKED
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
