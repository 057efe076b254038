-- Retention, outbox AGE policy: deletes at most $3 rows of one finished state whose last change lies
-- more than $2 milliseconds before the database clock, oldest first.
-- The partial index of migration V14 (state, updated_at, id over sent and dead rows) makes this a
-- range scan that stops after $3 rows. The rows are locked with SKIP LOCKED, so a row another
-- transaction holds (a replay moving it back to pending) is passed over instead of waited for, and
-- nothing beyond the deleted rows is locked. The state test is repeated as a constant list so no
-- bound value can ever select a pending or processing row.
-- $1 state (text: sent or dead), $2 max age in milliseconds (bigint), $3 limit (int)
WITH doomed AS (
    SELECT o.{outbox.id} AS id
      FROM {outbox} o
     WHERE o.{outbox.state} = $1
       AND o.{outbox.state} IN ('sent', 'dead')
       AND o.{outbox.updatedAt} < now() - $2 * interval '1 millisecond'
     ORDER BY o.{outbox.updatedAt}
     LIMIT $3
     FOR UPDATE SKIP LOCKED
)
DELETE FROM {outbox} t
 USING doomed
 WHERE t.{outbox.id} = doomed.id
   AND t.{outbox.state} IN ('sent', 'dead')
