-- Claims pending push rows for the relay, oldest first, at most one row per aggregate.
--
-- Runs under the relay lock (relay_lock.sql) in the same transaction.
--
-- Why a bounded prefix: the candidates are the `scan` oldest pending push rows by (created_at, id)
-- whose aggregate has no processing push row, read in order from idx_inbox_state_created
-- (state, created_at), so the walk stops after `scan` candidates instead of reading the backlog.
-- idx_inbox_consumption_pending (consumption, state, scheduled_at) would need no heap visit for the
-- push filter, but it orders by scheduled_at, which the relay does not keep equal to created_at, so
-- it cannot give the aggregate order; it serves the set of processing push rows instead (small:
-- at most a batch per replica, plus claims a crash left behind), hashed once per claim.
-- An aggregate with a processing push row (live lease or not: it waits for the forward or for the
-- reclaim) is left out of the candidates altogether. Were its rows kept, an aggregate stuck behind a
-- crashed replica's claim would pile its rows into the prefix and, once they filled it, stall every
-- other aggregate until the reclaim.
-- The candidates hold every pending push row of their aggregates older than any candidate, so the
-- first candidate of an aggregate is that aggregate's oldest pending row: the one the order allows.
-- A later row of the aggregate is never claimed, even when its head is locked.
-- The cost is O(scan + rows of blocked aggregates passed + processing rows), not O(backlog).
-- A row without an aggregate (NULL or empty) takes part in no order: every one of them may go.
--
-- $1 limit (int), $2 lease in milliseconds (bigint), $3 scan bound (int).
WITH candidates AS (
    SELECT i.{inbox.id} AS id,
           NULLIF(i.{inbox.aggregateId}, '') AS aggregate_id,
           i.{inbox.createdAt} AS created_at
      FROM {inbox} i
     WHERE i.{inbox.state} = 'pending'
       AND i.{inbox.consumption} = 'push'
       AND (NULLIF(i.{inbox.aggregateId}, '') IS NULL
            OR i.{inbox.aggregateId} NOT IN (
                SELECT p.{inbox.aggregateId}
                  FROM {inbox} p
                 WHERE p.{inbox.state} = 'processing'
                   AND p.{inbox.consumption} = 'push'
                   AND p.{inbox.aggregateId} IS NOT NULL))
     ORDER BY i.{inbox.createdAt}, i.{inbox.id}
     LIMIT $3
),
heads AS (
    SELECT c.id, c.created_at,
           row_number() OVER (PARTITION BY c.aggregate_id ORDER BY c.created_at, c.id) AS position,
           c.aggregate_id
      FROM candidates c
),
ready AS (
    SELECT h.id
      FROM heads h
     WHERE h.aggregate_id IS NULL OR h.position = 1
     ORDER BY h.created_at, h.id
     LIMIT $1
),
locked AS (
    SELECT i.{inbox.id} AS id
      FROM {inbox} i
     WHERE i.{inbox.id} IN (SELECT id FROM ready)
       AND i.{inbox.state} = 'pending'
       AND i.{inbox.consumption} = 'push'
     FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE {inbox} t
       SET {inbox.state} = 'processing',
           {inbox.claimToken} = gen_random_uuid(),
           {inbox.claimedAt} = now(),
           {inbox.leaseExpiresAt} = now() + $2 * interval '1 millisecond'
      FROM locked
     WHERE t.{inbox.id} = locked.id
 RETURNING t.{inbox.id} AS id, t.{inbox.claimToken} AS claim_token, t.{inbox.source} AS source,
           t.{inbox.idempotencyKey} AS idempotency_key, t.{inbox.aggregateId} AS aggregate_id,
           t.{inbox.eventType} AS event_type, t.{inbox.payload}::text AS payload,
           t.{inbox.headers}::text AS headers, t.{inbox.correlationId} AS correlation_id,
           t.{inbox.createdAt} AS created_at
)
SELECT id, claim_token, source, idempotency_key, aggregate_id, event_type, payload, headers,
       correlation_id
  FROM claimed
 ORDER BY created_at, id
