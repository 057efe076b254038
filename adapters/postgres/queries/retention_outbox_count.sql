-- Retention, outbox COUNT policy: keeps the $2 most recently changed rows of one finished state and
-- deletes at most $3 of the older ones, oldest first.
-- The boundary is the newest row to delete: the row just after the kept ones in (updated_at, id)
-- order, newest first (id breaks ties: one finish statement gives a whole batch the same
-- updated_at). Both walks use the partial index of migration V14; finding the boundary reads $2 + 1
-- index entries. Locking as in retention_outbox_age.sql: SKIP LOCKED, only the deleted rows.
-- $1 state (text: sent or dead), $2 rows to keep (bigint), $3 limit (int)
WITH boundary AS (
    SELECT b.{outbox.updatedAt} AS updated_at, b.{outbox.id} AS id
      FROM {outbox} b
     WHERE b.{outbox.state} = $1
       AND b.{outbox.state} IN ('sent', 'dead')
     ORDER BY b.{outbox.updatedAt} DESC, b.{outbox.id} DESC
    OFFSET $2
     LIMIT 1
), doomed AS (
    SELECT o.{outbox.id} AS id
      FROM {outbox} o, boundary
     WHERE o.{outbox.state} = $1
       AND o.{outbox.state} IN ('sent', 'dead')
       AND (o.{outbox.updatedAt}, o.{outbox.id}) <= (boundary.updated_at, boundary.id)
     ORDER BY o.{outbox.updatedAt}, o.{outbox.id}
     LIMIT $3
     FOR UPDATE OF o SKIP LOCKED
)
DELETE FROM {outbox} t
 USING doomed
 WHERE t.{outbox.id} = doomed.id
   AND t.{outbox.state} IN ('sent', 'dead')
