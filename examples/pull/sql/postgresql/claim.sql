-- Claims up to :batch due rows of one pull source, at most one per aggregate, and returns them with
-- their new claim token. Run it alone in its own transaction and commit before any handler starts.
--
-- Parameters: :source (text), :batch (int), :lease_ms (bigint), :cand_limit (int, bind
-- LEAST(GREATEST(3 * batch, 50), 500)).
--
-- A row is claimable when it is `pending` and its scheduled_at has passed, or `processing` with a
-- lease that has run out (a takeover: the new token fences the old owner out). A row whose
-- (source, aggregate_id) already has a `processing` row under a live lease is never returned.
--
-- Why three candidate sets instead of one scan in time order: a scan that stops after :cand_limit
-- rows sees nothing but the head of the source. When one aggregate owns that head (a burst of a
-- thousand events of one customer), every row behind it waits until the burst drains, one row per
-- handler run. So the candidates are:
--   walk    - one head row per aggregate, found by jumping from aggregate to aggregate through an
--             index on (source, aggregate_id, scheduled_at, created_at, id) of pending pull rows.
--             Each jump is one index probe whatever the backlog of an aggregate, so a busy
--             aggregate costs one step like any other. The walk stops after :cand_limit ready
--             aggregates or 4 * :cand_limit steps.
--   oldest  - the :cand_limit oldest due rows in claim order (rows without an aggregate come from
--             here, and it keeps the oldest rows first in line when there are more aggregates than
--             the walk visits).
--   expired - processing rows whose lease ran out; they go before the pending rows of their
--             aggregate, because they were its head when they were claimed.
-- Each aggregate then keeps only its first candidate, busy aggregates drop out, the oldest :batch
-- remain, and FOR UPDATE SKIP LOCKED takes them. Every claimer computes the same head for an
-- aggregate, so two concurrent claims race for one row lock and never take two rows of it; the lock
-- re-checks the row, so a row that another claim committed in the meantime is skipped.
WITH RECURSIVE walk (agg, id, due, created, ready, steps, ready_count) AS (
    SELECT h.aggregate_id, h.id, h.scheduled_at, h.created_at, r.ready, 1, r.ready
      FROM (SELECT i.aggregate_id, i.id, i.scheduled_at, i.created_at
              FROM inbox i
             WHERE i.source = CAST(:source AS text) AND i.consumption = 'pull'
               AND i.state = 'pending' AND i.aggregate_id IS NOT NULL
             ORDER BY i.aggregate_id, i.scheduled_at, i.created_at, i.id
             LIMIT 1) h
     CROSS JOIN LATERAL (
        SELECT CASE WHEN h.scheduled_at <= now()
                     AND NOT EXISTS (SELECT 1 FROM inbox b
                                      WHERE b.source = CAST(:source AS text) AND b.consumption = 'pull'
                                        AND b.state = 'processing' AND b.aggregate_id = h.aggregate_id
                                        AND b.lease_expires_at > now())
                    THEN 1 ELSE 0 END AS ready) r
  UNION ALL
    SELECT h.aggregate_id, h.id, h.scheduled_at, h.created_at, r.ready, w.steps + 1,
           w.ready_count + r.ready
      FROM walk w
     CROSS JOIN LATERAL (
        SELECT i.aggregate_id, i.id, i.scheduled_at, i.created_at
          FROM inbox i
         WHERE i.source = CAST(:source AS text) AND i.consumption = 'pull'
           AND i.state = 'pending' AND i.aggregate_id > w.agg
         ORDER BY i.aggregate_id, i.scheduled_at, i.created_at, i.id
         LIMIT 1) h
     CROSS JOIN LATERAL (
        SELECT CASE WHEN h.scheduled_at <= now()
                     AND NOT EXISTS (SELECT 1 FROM inbox b
                                      WHERE b.source = CAST(:source AS text) AND b.consumption = 'pull'
                                        AND b.state = 'processing' AND b.aggregate_id = h.aggregate_id
                                        AND b.lease_expires_at > now())
                    THEN 1 ELSE 0 END AS ready) r
     WHERE w.ready_count < CAST(:cand_limit AS int) AND w.steps < 4 * CAST(:cand_limit AS int)
),
oldest AS (
    SELECT i.id, i.aggregate_id AS agg, i.scheduled_at AS due, i.created_at AS created
      FROM inbox i
     WHERE i.source = CAST(:source AS text) AND i.consumption = 'pull'
       AND i.state = 'pending' AND i.scheduled_at <= now()
     ORDER BY i.scheduled_at, i.created_at, i.id
     LIMIT CAST(:cand_limit AS int)
),
expired AS (
    SELECT i.id, i.aggregate_id AS agg, i.scheduled_at AS due, i.created_at AS created
      FROM inbox i
     WHERE i.source = CAST(:source AS text) AND i.consumption = 'pull'
       AND i.state = 'processing' AND i.lease_expires_at <= now()
     ORDER BY i.lease_expires_at, i.id
     LIMIT CAST(:cand_limit AS int)
),
-- Each candidate set carries the columns that the ranking needs, so no plan reads the table again
-- for them. (A generic plan, which a driver may cache, cannot see how few candidates there are and
-- would otherwise scan the whole table to join them back.) Expired rows rank first (lane 0).
pool AS (
    SELECT id, agg, due, created, 1 AS lane FROM walk WHERE ready = 1
    UNION SELECT id, agg, due, created, 1 FROM oldest
    UNION SELECT id, agg, due, created, 0 FROM expired
),
candidates AS (
    SELECT p.id, p.agg AS aggregate_id, p.due AS scheduled_at, p.created AS created_at,
           row_number() OVER (
               PARTITION BY p.agg, CASE WHEN p.agg IS NULL THEN p.id END
               ORDER BY p.lane, p.due, p.created, p.id) AS place
      FROM pool p
),
picked AS (
    SELECT c.id
      FROM candidates c
     WHERE c.place = 1
       AND (c.aggregate_id IS NULL
            OR NOT EXISTS (SELECT 1 FROM inbox b
                            WHERE b.source = CAST(:source AS text) AND b.consumption = 'pull'
                              AND b.state = 'processing' AND b.aggregate_id = c.aggregate_id
                              AND b.lease_expires_at > now()))
     ORDER BY c.scheduled_at, c.created_at, c.id
     LIMIT CAST(:batch AS int)
),
locked AS (
    SELECT i.id
      FROM inbox i
     WHERE i.id IN (SELECT id FROM picked)
       AND i.source = CAST(:source AS text) AND i.consumption = 'pull'
       AND ((i.state = 'pending' AND i.scheduled_at <= now())
            OR (i.state = 'processing' AND i.lease_expires_at <= now()))
     FOR UPDATE SKIP LOCKED
)
UPDATE inbox t
   SET state = 'processing',
       claim_token = gen_random_uuid(),
       claimed_at = now(),
       lease_expires_at = now() + CAST(:lease_ms AS bigint) * interval '1 millisecond'
  FROM locked
 WHERE t.id = locked.id
RETURNING t.id, t.claim_token, t.source, t.idempotency_key, t.aggregate_id, t.event_type,
          t.payload, t.headers, t.attempt, t.correlation_id, t.created_at;
