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
-- remain, and FOR UPDATE SKIP LOCKED takes them. The walk runs only when the oldest rows and the
-- expired leases cannot settle the batch on their own (see `short_way` below): with many
-- aggregates in round robin it is skipped, and the claim costs about half as much. Every claimer computes the same head for an
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
--
-- The short way: rank the window and the expired leases alone. A walk head that is not in the
-- window comes after every row of the window (the window is the oldest due rows, and a head is a
-- due row), and its aggregate has no row in the window (else the head, being older, would be in
-- it), so it changes the place of no window or expired row. When the short way finds :batch rows
-- and none of them comes after the window's last row, the walk could not have put a row ahead of
-- any of them: the answer is the same as the long way's, and the walk, which costs about as much
-- as the rest of the claim, never runs (PostgreSQL only computes a CTE when a plan reads it).
near AS (
    SELECT n.id, n.agg, n.due, n.created,
           row_number() OVER (
               PARTITION BY n.agg, CASE WHEN n.agg IS NULL THEN n.id END
               ORDER BY n.lane, n.due, n.created, n.id) AS place
      FROM (SELECT id, agg, due, created, 1 AS lane FROM oldest
            UNION ALL SELECT id, agg, due, created, 0 FROM expired) n
),
near_picked AS (
    SELECT c.id, c.due, c.created
      FROM near c
     WHERE c.place = 1
       AND (c.agg IS NULL
            OR NOT EXISTS (SELECT 1 FROM inbox b
                            WHERE b.source = CAST(:source AS text) AND b.consumption = 'pull'
                              AND b.state = 'processing' AND b.aggregate_id = c.agg
                              AND b.lease_expires_at > now()))
     ORDER BY c.due, c.created, c.id
     LIMIT CAST(:batch AS int)
),
short_way AS (
    SELECT count(*) >= CAST(:batch AS int)
           AND NOT EXISTS (
               SELECT 1
                 FROM near_picked n
                 JOIN (SELECT due, created, id FROM oldest
                        ORDER BY due DESC, created DESC, id DESC LIMIT 1) last
                   ON (n.due, n.created, n.id) > (last.due, last.created, last.id)) AS enough
      FROM near_picked
),
-- The long way: every ready walk head joins the window and the expired leases.
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
    SELECT id FROM near_picked WHERE (SELECT enough FROM short_way)
    UNION ALL
    (SELECT c.id
       FROM candidates c
      WHERE NOT (SELECT enough FROM short_way)
        AND c.place = 1
        AND (c.aggregate_id IS NULL
             OR NOT EXISTS (SELECT 1 FROM inbox b
                             WHERE b.source = CAST(:source AS text) AND b.consumption = 'pull'
                               AND b.state = 'processing' AND b.aggregate_id = c.aggregate_id
                               AND b.lease_expires_at > now()))
      ORDER BY c.scheduled_at, c.created_at, c.id
      LIMIT CAST(:batch AS int))
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
