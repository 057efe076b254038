-- Claims the head row of each ready key, walking the keys in key order from a cursor.
--
-- Why a walk: a row of a non-empty key may go only when no earlier row of its key is pending or
-- processing, i.e. only the key's head may go. Filtering pending rows by "am I the head" costs
-- O(backlog) once heads are sparse (one hot key with half a million rows puts them all in front of
-- the other keys). Instead this statement jumps from key to key through the (key, sequence) index of
-- pending and processing rows: each step is one index probe that lands on the next key's head. A step
-- costs O(log n) whatever the backlog, the walk stops after `limit` ready heads or `scan` keys, so a
-- claim costs O(batch + blocked keys passed), and a hot key is one step like any other key.
-- The cursor makes every replica's walk continue where its last one stopped, so every ready key gets
-- its turn and none starves behind another. When the walk passes the last key before it has `limit`
-- ready heads, it wraps once to the first key and goes on up to the cursor itself, in this statement:
-- on a sparse backlog (a few new rows a wake-up, as with logical capture) nearly every claim wraps,
-- and a second statement for it cost a round trip before the rows could go.
--
-- $1 cursor (text; '' = from the first key, which also skips the empty key: it orders nothing)
-- $2 limit (int), $3 lease in milliseconds (bigint), $4 scan bound (int)
-- Returns one row per claimed row, plus always one row carrying the walk's end (last_key, walked,
-- ready); the claim columns are NULL on that row when nothing was claimed. The walk ends at `limit`
-- ready heads, at `scan` keys, or back at the cursor after its wrap.
-- Commits without waiting for its WAL flush (the set_config filter in `locked`): why that is safe is
-- written in outbox_claim_unkeyed.sql.
WITH RECURSIVE walk AS (
    -- Each step is the next key after the previous one; only when there is none (the walk passed the
    -- last key) does the second branch run, once a walk and never for a walk from the first key:
    -- the Append under LIMIT 1 reads its branches in order and stops at the first row.
    SELECT first.k, first.id, first.tid, first.st, first.due, 1 AS n,
           CASE WHEN first.st = 'pending' AND first.due <= now() THEN 1 ELSE 0 END AS ready,
           first.wrapped
      FROM ((SELECT o.{outbox.key} AS k, o.{outbox.id} AS id, o.ctid AS tid, o.{outbox.state} AS st,
                    o.{outbox.scheduledAt} AS due, false AS wrapped
               FROM {outbox} o
              WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > $1
              ORDER BY o.{outbox.key}, o.{outbox.sequence}
              LIMIT 1)
            UNION ALL
            (SELECT o.{outbox.key}, o.{outbox.id}, o.ctid, o.{outbox.state}, o.{outbox.scheduledAt}, true
               FROM {outbox} o
              WHERE $1 <> '' AND o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > ''
                AND o.{outbox.key} <= $1
              ORDER BY o.{outbox.key}, o.{outbox.sequence}
              LIMIT 1)
            LIMIT 1) first
  UNION ALL
    SELECT nxt.k, nxt.id, nxt.tid, nxt.st, nxt.due, w.n + 1,
           w.ready + CASE WHEN nxt.st = 'pending' AND nxt.due <= now() THEN 1 ELSE 0 END,
           nxt.wrapped
      FROM walk w
     CROSS JOIN LATERAL (
        (SELECT o.{outbox.key} AS k, o.{outbox.id} AS id, o.ctid AS tid, o.{outbox.state} AS st,
                o.{outbox.scheduledAt} AS due, w.wrapped AS wrapped
           FROM {outbox} o
          WHERE o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > w.k
          ORDER BY o.{outbox.key}, o.{outbox.sequence}
          LIMIT 1)
        UNION ALL
        (SELECT o.{outbox.key}, o.{outbox.id}, o.ctid, o.{outbox.state}, o.{outbox.scheduledAt}, true
           FROM {outbox} o
          WHERE NOT w.wrapped AND $1 <> ''
            AND o.{outbox.state} IN ('pending', 'processing') AND o.{outbox.key} > ''
          ORDER BY o.{outbox.key}, o.{outbox.sequence}
          LIMIT 1)
        LIMIT 1) nxt
     -- After the wrap the walk stops past the cursor: the keys after it were walked before the wrap.
     WHERE w.ready < $2 AND w.n < $4 AND NOT (nxt.wrapped AND nxt.k > $1)
),
-- The heads are locked through the address the walk read them at (ctid) rather than a second probe of
-- the primary key. A head updated since the walk read it has a new address: locking follows the
-- update, re-checks these conditions on the new version, finds its ctid no longer matches and skips
-- it, exactly as it skips a head another replica holds locked.
locked AS (
    SELECT o.{outbox.id} AS id, o.ctid AS tid
      FROM walk w
      JOIN {outbox} o ON o.ctid = w.tid AND o.{outbox.id} = w.id
     WHERE w.st = 'pending' AND w.due <= now()
       AND o.{outbox.state} = 'pending' AND o.{outbox.scheduledAt} <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     FOR UPDATE OF o SKIP LOCKED
),
-- The update reaches each locked row by its physical address (ctid), which cannot change while this
-- statement holds the row's lock: a primary-key probe per row saved. The id check keeps the match
-- exact where a ctid repeats (the partitions of a partitioned table).
claimed AS (
    UPDATE {outbox} t
       SET {outbox.state} = 'processing',
           {outbox.claimToken} = gen_random_uuid(),
           {outbox.claimedAt} = now(),
           {outbox.leaseExpiresAt} = now() + $3 * interval '1 millisecond',
           {outbox.updatedAt} = now()
      FROM locked
     WHERE t.ctid = locked.tid AND t.{outbox.id} = locked.id
 RETURNING t.{outbox.id} AS id, t.{outbox.claimToken} AS claim_token, t.{outbox.topic} AS topic,
           t.{outbox.key} AS key, t.{outbox.aggregateType} AS aggregate_type,
           t.{outbox.payload}::text AS payload, t.{outbox.headers}::text AS headers,
           t.{outbox.attempt} AS attempt, t.{outbox.maxAttempts} AS max_attempts,
           t.{outbox.sequence} AS sequence,
           floor(extract(epoch FROM t.{outbox.createdAt}) * 1000)::bigint AS created_at_ms
),
walk_end AS (
    SELECT k AS last_key, n AS walked, ready FROM walk ORDER BY n DESC LIMIT 1
)
SELECT e.last_key, COALESCE(e.walked, 0) AS walked, COALESCE(e.ready, 0) AS ready, c.*
  FROM (SELECT 1) AS one
  LEFT JOIN walk_end e ON true
  LEFT JOIN claimed c ON true
