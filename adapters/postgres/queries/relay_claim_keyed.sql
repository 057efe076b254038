-- Claims the oldest pending push row of each ready aggregate, walking aggregates in key order from a
-- cursor. Runs under the relay lock (relay_lock.sql) in the same transaction.
--
-- Why a walk: only an aggregate's oldest pending row may go, and only while no push row of the
-- aggregate is processing. Reading pending rows in created_at order and keeping the first of each
-- aggregate costs O(rows read): when each aggregate's rows arrived in a burst, the oldest thousand rows
-- hold a handful of aggregates, and a claim of 100 heads has to read past tens of thousands of rows.
-- Instead each step of this walk is one probe of the V15 index (pending push rows by aggregate,
-- created_at, id) that lands on the next aggregate's oldest pending row, plus a look at the V19
-- index idx_inbox_push_busy (push rows processing, by aggregate) to see whether the aggregate has a
-- row processing (a relay claim in flight, or one a crashed replica left for the reclaim): one probe
-- per aggregate, or one read of the whole index into a hash table when it is small. It holds no
-- pull rows, so pull rows held under long leases cost the claim nothing. The walk stops after
-- `limit` ready heads or `scan` aggregates, so a claim costs O(batch + blocked aggregates passed),
-- not O(backlog).
-- The processing probe is needed even though the head is the oldest pending row: a row that commits
-- late can carry a created_at older than the row already in flight, and it must still wait.
-- The cursor makes each replica's walk continue where its last one stopped, so every ready aggregate
-- gets its turn and none starves behind another; the order between aggregates is the key order of the
-- rotation, the order within an aggregate is created_at (then id), as before.
-- A row without an aggregate (NULL or empty) is left to relay_claim_unkeyed.sql; '' as the cursor
-- starts at the first aggregate and also skips those rows.
--
-- $1 cursor (text), $2 limit (int), $3 lease in milliseconds (bigint), $4 scan bound (int)
-- Returns one row per claimed row, plus always one row carrying the walk's end (last_key, walked,
-- ready; last_key is the cursor when no aggregate was left after it); the claim columns are NULL on
-- that row when nothing was claimed.
WITH RECURSIVE walk AS (
    -- The start: no row yet, positioned at the cursor; every step below is one aggregate.
    SELECT $1::text AS k, NULL::uuid AS id, 0 AS n, 0 AS free, 0 AS ready
  UNION ALL
    SELECT nxt.k, nxt.id, w.n + 1, nxt.free, w.ready + nxt.free
      FROM walk w
     CROSS JOIN LATERAL (
        SELECT NULLIF(i.{inbox.aggregateId}, '') AS k, i.{inbox.id} AS id,
               CASE WHEN EXISTS (
                   SELECT 1
                     FROM {inbox} p
                    WHERE p.{inbox.aggregateId} = i.{inbox.aggregateId}
                      AND p.{inbox.state} = 'processing'
                      AND p.{inbox.consumption} = 'push') THEN 0 ELSE 1 END AS free
          FROM {inbox} i
         WHERE i.{inbox.state} = 'pending' AND i.{inbox.consumption} = 'push'
           AND NULLIF(i.{inbox.aggregateId}, '') > w.k
         ORDER BY NULLIF(i.{inbox.aggregateId}, ''), i.{inbox.createdAt}, i.{inbox.id}
         LIMIT 1) nxt
     WHERE w.ready < $2 AND w.n < $4
),
locked AS (
    SELECT i.{inbox.id} AS id, i.ctid AS tid
      FROM {inbox} i
     WHERE i.{inbox.id} IN (SELECT id FROM walk WHERE free = 1)
       AND i.{inbox.state} = 'pending'
       AND i.{inbox.consumption} = 'push'
     FOR UPDATE SKIP LOCKED
),
-- The update reaches each locked row by its physical address (ctid), which cannot change while this
-- statement holds the row's lock: a primary-key probe per row saved. The id check keeps the match
-- exact where a ctid repeats (the partitions of a partitioned table).
claimed AS (
    UPDATE {inbox} t
       SET {inbox.state} = 'processing',
           {inbox.claimToken} = gen_random_uuid(),
           {inbox.claimedAt} = now(),
           {inbox.leaseExpiresAt} = now() + $3 * interval '1 millisecond'
      FROM locked
     WHERE t.ctid = locked.tid AND t.{inbox.id} = locked.id
 RETURNING t.{inbox.id} AS id, t.{inbox.claimToken} AS claim_token, t.{inbox.source} AS source,
           t.{inbox.idempotencyKey} AS idempotency_key, t.{inbox.aggregateId} AS aggregate_id,
           t.{inbox.eventType} AS event_type, t.{inbox.payload}::text AS payload,
           t.{inbox.headers}::text AS headers, t.{inbox.correlationId} AS correlation_id
),
walk_end AS (
    SELECT k AS last_key, n AS walked, ready FROM walk ORDER BY n DESC LIMIT 1
)
SELECT e.last_key, COALESCE(e.walked, 0) AS walked, COALESCE(e.ready, 0) AS ready, c.*
  FROM (SELECT 1) AS one
  LEFT JOIN walk_end e ON true
  LEFT JOIN claimed c ON true
