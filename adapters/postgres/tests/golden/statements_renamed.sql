-- ping
SELECT 1;

-- table_columns
SELECT to_regclass($1) IS NOT NULL AS table_found,
       ARRAY(SELECT a.attname::text
               FROM pg_catalog.pg_attribute AS a
              WHERE a.attrelid = to_regclass($1)
                AND a.attnum > 0
                AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns;

-- insert_outbox
INSERT INTO "qb_outbox" (
    "id",
    "topic",
    "key",
    "aggregate_type",
    "body",
    "headers",
    "max_attempts",
    "scheduled_at"
)
VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, CURRENT_TIMESTAMP))
RETURNING "id", "sequence";

-- insert_inbox
INSERT INTO "qb_inbox" (
    "id",
    "source",
    "dedup_key",
    "aggregate_id",
    "event_type",
    "payload",
    "headers",
    "correlation_id",
    "consumption",
    "state",
    "last_error"
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT DO NOTHING
RETURNING "id";

-- insert_inbox_many
INSERT INTO "qb_inbox" (
    "id",
    "source",
    "dedup_key",
    "aggregate_id",
    "event_type",
    "payload",
    "headers",
    "correlation_id",
    "consumption",
    "state",
    "last_error"
)
SELECT
    m.id,
    m.source,
    m.idempotency_key,
    m.aggregate_id,
    m.event_type,
    m.payload::jsonb,
    m.headers::jsonb,
    m.correlation_id,
    m.consumption,
    m.state,
    m.last_error
FROM unnest(
    $1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::text[]
) AS m (
    id, source, idempotency_key, aggregate_id, event_type, payload, headers,
    correlation_id, consumption, state, last_error
)
ON CONFLICT DO NOTHING
RETURNING "id";

-- outbox_claim_keyed
WITH RECURSIVE walk AS (
    SELECT first.k, first.id, first.tid, first.st, first.due, 1 AS n,
           CASE WHEN first.st = 'pending' AND first.due <= now() THEN 1 ELSE 0 END AS ready,
           first.wrapped
      FROM ((SELECT o."key" AS k, o."id" AS id, o.ctid AS tid, o."state" AS st,
                    o."scheduled_at" AS due, false AS wrapped
               FROM "qb_outbox" o
              WHERE o."state" IN ('pending', 'processing') AND o."key" > $1
              ORDER BY o."key", o."sequence"
              LIMIT 1)
            UNION ALL
            (SELECT o."key", o."id", o.ctid, o."state", o."scheduled_at", true
               FROM "qb_outbox" o
              WHERE $1 <> '' AND o."state" IN ('pending', 'processing') AND o."key" > ''
                AND o."key" <= $1
              ORDER BY o."key", o."sequence"
              LIMIT 1)
            LIMIT 1) first
  UNION ALL
    SELECT nxt.k, nxt.id, nxt.tid, nxt.st, nxt.due, w.n + 1,
           w.ready + CASE WHEN nxt.st = 'pending' AND nxt.due <= now() THEN 1 ELSE 0 END,
           nxt.wrapped
      FROM walk w
     CROSS JOIN LATERAL (
        (SELECT o."key" AS k, o."id" AS id, o.ctid AS tid, o."state" AS st,
                o."scheduled_at" AS due, w.wrapped AS wrapped
           FROM "qb_outbox" o
          WHERE o."state" IN ('pending', 'processing') AND o."key" > w.k
          ORDER BY o."key", o."sequence"
          LIMIT 1)
        UNION ALL
        (SELECT o."key", o."id", o.ctid, o."state", o."scheduled_at", true
           FROM "qb_outbox" o
          WHERE NOT w.wrapped AND $1 <> ''
            AND o."state" IN ('pending', 'processing') AND o."key" > ''
          ORDER BY o."key", o."sequence"
          LIMIT 1)
        LIMIT 1) nxt
     WHERE w.ready < $2 AND w.n < $4 AND NOT (nxt.wrapped AND nxt.k > $1)
),
locked AS (
    SELECT o."id" AS id, o.ctid AS tid
      FROM walk w
      JOIN "qb_outbox" o ON o.ctid = w.tid AND o."id" = w.id
     WHERE w.st = 'pending' AND w.due <= now()
       AND o."state" = 'pending' AND o."scheduled_at" <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     FOR UPDATE OF o SKIP LOCKED
),
claimed AS (
    UPDATE "qb_outbox" t
       SET "state" = 'processing',
           "claim_token" = gen_random_uuid(),
           "claimed_at" = now(),
           "lease_expires_at" = now() + $3 * interval '1 millisecond',
           "updated_at" = now()
      FROM locked
     WHERE t.ctid = locked.tid AND t."id" = locked.id
 RETURNING t."id" AS id, t."claim_token" AS claim_token, t."topic" AS topic,
           t."key" AS key, t."aggregate_type" AS aggregate_type,
           t."body"::text AS payload, t."headers"::text AS headers,
           t."attempt" AS attempt, t."max_attempts" AS max_attempts,
           t."sequence" AS sequence,
           floor(extract(epoch FROM t."created_at") * 1000)::bigint AS created_at_ms
),
walk_end AS (
    SELECT k AS last_key, n AS walked, ready FROM walk ORDER BY n DESC LIMIT 1
)
SELECT e.last_key, COALESCE(e.walked, 0) AS walked, COALESCE(e.ready, 0) AS ready, c.*
  FROM (SELECT 1) AS one
  LEFT JOIN walk_end e ON true
  LEFT JOIN claimed c ON true;

-- outbox_claim_unkeyed
WITH locked AS (
    SELECT o."id" AS id, o.ctid AS tid
      FROM "qb_outbox" o
     WHERE o."state" = 'pending'
       AND (o."key" IS NULL OR o."key" = '')
       AND o."scheduled_at" <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     ORDER BY o."scheduled_at"
     LIMIT $1
     FOR UPDATE SKIP LOCKED
)
UPDATE "qb_outbox" t
   SET "state" = 'processing',
       "claim_token" = gen_random_uuid(),
       "claimed_at" = now(),
       "lease_expires_at" = now() + $2 * interval '1 millisecond',
       "updated_at" = now()
  FROM locked
 WHERE t.ctid = locked.tid AND t."id" = locked.id
RETURNING t."id" AS id, t."claim_token" AS claim_token, t."topic" AS topic,
          t."key" AS key, t."aggregate_type" AS aggregate_type,
          t."body"::text AS payload, t."headers"::text AS headers,
          t."attempt" AS attempt, t."max_attempts" AS max_attempts,
          t."sequence" AS sequence,
          floor(extract(epoch FROM t."created_at") * 1000)::bigint AS created_at_ms;

-- outbox_claim_released
WITH heads AS (
    SELECT h.id, h.tid
      FROM unnest($1::text[]) AS r(k)
     CROSS JOIN LATERAL (
        SELECT o."id" AS id, o.ctid AS tid, o."state" AS st, o."scheduled_at" AS due
          FROM "qb_outbox" o
         WHERE o."state" IN ('pending', 'processing') AND o."key" = r.k
         ORDER BY o."key", o."sequence"
         LIMIT 1) h
     WHERE h.st = 'pending' AND h.due <= now()
),
locked AS (
    SELECT o."id" AS id, o.ctid AS tid
      FROM heads h
      JOIN "qb_outbox" o ON o.ctid = h.tid AND o."id" = h.id
     WHERE o."state" = 'pending' AND o."scheduled_at" <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     FOR UPDATE OF o SKIP LOCKED
)
UPDATE "qb_outbox" t
   SET "state" = 'processing',
       "claim_token" = gen_random_uuid(),
       "claimed_at" = now(),
       "lease_expires_at" = now() + $2 * interval '1 millisecond',
       "updated_at" = now()
  FROM locked
 WHERE t.ctid = locked.tid AND t."id" = locked.id
RETURNING t."id" AS id, t."claim_token" AS claim_token, t."topic" AS topic,
          t."key" AS key, t."aggregate_type" AS aggregate_type,
          t."body"::text AS payload, t."headers"::text AS headers,
          t."attempt" AS attempt, t."max_attempts" AS max_attempts,
          t."sequence" AS sequence,
          floor(extract(epoch FROM t."created_at") * 1000)::bigint AS created_at_ms;

-- outbox_renew
UPDATE "qb_outbox" t
   SET "lease_expires_at" = now() + $3 * interval '1 millisecond'
  FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS held(id, token, ord)
 WHERE t."id" = held.id
   AND t."claim_token" = held.token
   AND t."state" = 'processing'
   AND t."lease_expires_at" > now()
RETURNING held.ord;

-- outbox_finish
UPDATE "qb_outbox" t
   SET "state" = f.state,
       "attempt" = COALESCE(f.attempt, t."attempt"),
       "scheduled_at" = CASE
           WHEN f.delay_ms IS NULL THEN t."scheduled_at"
           ELSE now() + f.delay_ms * interval '1 millisecond'
       END,
       "last_error" = COALESCE(f.error, t."last_error"),
       "claim_token" = NULL,
       "lease_expires_at" = NULL,
       "updated_at" = now()
  FROM (SELECT u.*, 'processing'::text AS held, now() AS at
          FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::bigint[], $6::text[])
               WITH ORDINALITY AS u(id, token, state, attempt, delay_ms, error, ord)
        OFFSET 0) f
 WHERE t."id" = ANY($1::uuid[])
   AND t."id" = f.id
   AND t."claim_token" = f.token
   AND t."state" = f.held
   AND t."lease_expires_at" > f.at
RETURNING f.ord;

-- outbox_reclaim
UPDATE "qb_outbox"
   SET "state" = 'pending',
       "claim_token" = NULL,
       "lease_expires_at" = NULL,
       "updated_at" = now()
 WHERE "state" = 'processing'
   AND COALESCE("lease_expires_at", "claimed_at" + $1 * interval '1 millisecond') < now();

-- outbox_pending_stats
SELECT "topic" AS topic,
       count(*) AS pending,
       EXTRACT(EPOCH FROM (now() - min("created_at")))::float8 AS oldest_age_seconds
  FROM "qb_outbox"
 WHERE "state" = 'pending'
 GROUP BY "topic";

-- outbox_next_deadline
SELECT EXTRACT(EPOCH FROM (min("scheduled_at") - now()))::float8 AS seconds
  FROM "qb_outbox"
 WHERE "state" = 'pending'
   AND "scheduled_at" > now();

-- relay_lock
SELECT pg_advisory_xact_lock(hashtext($1)), set_config('synchronous_commit', 'off', true);

-- relay_claim_keyed
WITH RECURSIVE walk AS (
    SELECT $1::text AS k, NULL::uuid AS id, 0 AS n, 0 AS free, 0 AS ready
  UNION ALL
    SELECT nxt.k, nxt.id, w.n + 1, nxt.free, w.ready + nxt.free
      FROM walk w
     CROSS JOIN LATERAL (
        SELECT NULLIF(i."aggregate_id", '') AS k, i."id" AS id,
               CASE WHEN EXISTS (
                   SELECT 1
                     FROM "qb_inbox" p
                    WHERE p."aggregate_id" = i."aggregate_id"
                      AND p."state" = 'processing'
                      AND p."consumption" = 'push') THEN 0 ELSE 1 END AS free
          FROM "qb_inbox" i
         WHERE i."state" = 'pending' AND i."consumption" = 'push'
           AND NULLIF(i."aggregate_id", '') > w.k
         ORDER BY NULLIF(i."aggregate_id", ''), i."created_at", i."id"
         LIMIT 1) nxt
     WHERE w.ready < $2 AND w.n < $4
),
locked AS (
    SELECT i."id" AS id, i.ctid AS tid
      FROM "qb_inbox" i
     WHERE i."id" IN (SELECT id FROM walk WHERE free = 1)
       AND i."state" = 'pending'
       AND i."consumption" = 'push'
     FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE "qb_inbox" t
       SET "state" = 'processing',
           "claim_token" = gen_random_uuid(),
           "claimed_at" = now(),
           "lease_expires_at" = now() + $3 * interval '1 millisecond'
      FROM locked
     WHERE t.ctid = locked.tid AND t."id" = locked.id
 RETURNING t."id" AS id, t."claim_token" AS claim_token, t."source" AS source,
           t."dedup_key" AS idempotency_key, t."aggregate_id" AS aggregate_id,
           t."event_type" AS event_type, t."payload"::text AS payload,
           t."headers"::text AS headers, t."correlation_id" AS correlation_id
),
walk_end AS (
    SELECT k AS last_key, n AS walked, ready FROM walk ORDER BY n DESC LIMIT 1
)
SELECT e.last_key, COALESCE(e.walked, 0) AS walked, COALESCE(e.ready, 0) AS ready, c.*
  FROM (SELECT 1) AS one
  LEFT JOIN walk_end e ON true
  LEFT JOIN claimed c ON true;

-- relay_claim_unkeyed
WITH locked AS (
    SELECT i."id" AS id, i.ctid AS tid
      FROM "qb_inbox" i
     WHERE i."state" = 'pending'
       AND i."consumption" = 'push'
       AND NULLIF(i."aggregate_id", '') IS NULL
     ORDER BY NULLIF(i."aggregate_id", ''), i."created_at", i."id"
     LIMIT $1
     FOR UPDATE SKIP LOCKED
)
UPDATE "qb_inbox" t
   SET "state" = 'processing',
       "claim_token" = gen_random_uuid(),
       "claimed_at" = now(),
       "lease_expires_at" = now() + $2 * interval '1 millisecond'
  FROM locked
 WHERE t.ctid = locked.tid AND t."id" = locked.id
RETURNING t."id" AS id, t."claim_token" AS claim_token, t."source" AS source,
          t."dedup_key" AS idempotency_key, t."aggregate_id" AS aggregate_id,
          t."event_type" AS event_type, t."payload"::text AS payload,
          t."headers"::text AS headers, t."correlation_id" AS correlation_id;

-- relay_forward
WITH input AS (
    SELECT *
      FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
           WITH ORDINALITY AS f(inbox_id, token, topic, key, payload, headers, max_attempts, ord)
),
done AS (
    UPDATE "qb_inbox" t
       SET "state" = 'processed',
           "processed_at" = now(),
           "claim_token" = NULL,
           "lease_expires_at" = NULL
      FROM input f
     WHERE t."id" = f.inbox_id
       AND t."claim_token" = f.token
       AND t."state" = 'processing'
       AND t."lease_expires_at" > now()
 RETURNING f.ord
),
inserted AS (
    INSERT INTO "qb_outbox" (
        "topic",
        "key",
        "body",
        "headers",
        "max_attempts"
    )
    SELECT f.topic, f.key, f.payload::jsonb, f.headers::jsonb, f.max_attempts
      FROM input f
      JOIN done d ON d.ord = f.ord
     ORDER BY f.ord
    RETURNING 1
)
SELECT ord FROM done;

-- relay_dead
UPDATE "qb_inbox"
   SET "state" = 'dead',
       "last_error" = $3,
       "claim_token" = NULL,
       "lease_expires_at" = NULL
 WHERE "id" = $1
   AND "claim_token" = $2
   AND "state" = 'processing'
   AND "lease_expires_at" > now()
RETURNING "id";

-- relay_reclaim
UPDATE "qb_inbox"
   SET "state" = 'pending',
       "claim_token" = NULL,
       "lease_expires_at" = NULL
 WHERE "state" = 'processing'
   AND "consumption" = 'push'
   AND COALESCE("lease_expires_at", "claimed_at" + $1 * interval '1 millisecond') < now();

-- relay_oldest_pending
SELECT COALESCE(EXTRACT(EPOCH FROM (now() - min("created_at"))), 0)::float8 AS age_seconds
  FROM "qb_inbox"
 WHERE "state" = 'pending';

-- retention_outbox_age
WITH doomed AS (
    SELECT o."id" AS id
      FROM "qb_outbox" o
     WHERE o."state" = $1
       AND o."state" IN ('sent', 'dead')
       AND o."updated_at" < now() - $2 * interval '1 millisecond'
     ORDER BY o."updated_at"
     LIMIT $3
     FOR UPDATE SKIP LOCKED
)
DELETE FROM "qb_outbox" t
 USING doomed
 WHERE t."id" = doomed.id
   AND t."state" IN ('sent', 'dead');

-- retention_outbox_count
WITH boundary AS (
    SELECT b."updated_at" AS updated_at, b."id" AS id
      FROM "qb_outbox" b
     WHERE b."state" = $1
       AND b."state" IN ('sent', 'dead')
     ORDER BY b."updated_at" DESC, b."id" DESC
    OFFSET $2
     LIMIT 1
), doomed AS (
    SELECT o."id" AS id
      FROM "qb_outbox" o, boundary
     WHERE o."state" = $1
       AND o."state" IN ('sent', 'dead')
       AND (o."updated_at", o."id") <= (boundary.updated_at, boundary.id)
     ORDER BY o."updated_at", o."id"
     LIMIT $3
     FOR UPDATE OF o SKIP LOCKED
)
DELETE FROM "qb_outbox" t
 USING doomed
 WHERE t."id" = doomed.id
   AND t."state" IN ('sent', 'dead');

-- retention_inbox_age
WITH doomed AS (
    SELECT i."id" AS id
      FROM "qb_inbox" i
     WHERE i."state" = $1
       AND i."state" IN ('processed', 'dead')
       AND i."created_at" < now() - $2 * interval '1 millisecond'
     ORDER BY i."created_at"
     LIMIT $3
     FOR UPDATE SKIP LOCKED
)
DELETE FROM "qb_inbox" t
 USING doomed
 WHERE t."id" = doomed.id
   AND t."state" IN ('processed', 'dead');

-- replay_candidates
SELECT o."id" AS id, o."topic" AS topic
  FROM "qb_outbox" o
 WHERE o."state" IN ('sent', 'dead')
   AND o."id" >= $1::uuid
   AND (o."id" <> $1::uuid OR $2::boolean)
   AND ($3::uuid[] IS NULL OR o."id" = ANY($3::uuid[]))
   AND ($4::text IS NULL OR o."topic" = $4::text)
   AND ($5::text[] IS NULL OR o."topic" = ANY($5::text[]))
   AND ($6::timestamptz IS NULL OR o."created_at" > $6::timestamptz)
   AND ($7::timestamptz IS NULL OR o."created_at" < $7::timestamptz)
 ORDER BY o."id"
 LIMIT $8;

-- replay_move
UPDATE "qb_outbox"
   SET "state" = 'pending',
       "attempt" = 0,
       "scheduled_at" = now(),
       "last_error" = NULL,
       "claimed_at" = NULL,
       "claim_token" = NULL,
       "lease_expires_at" = NULL,
       "updated_at" = now()
 WHERE "id" = ANY($1::uuid[])
   AND "state" IN ('sent', 'dead');

