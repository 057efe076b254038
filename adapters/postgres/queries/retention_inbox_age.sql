-- Retention, inbox AGE policy: deletes at most $3 rows of one finished state received more than $2
-- milliseconds before the database clock, oldest first.
-- idx_inbox_state_created (state, created_at) of migration V2 makes this a range scan that stops
-- after $3 rows. SKIP LOCKED passes over a row another transaction holds instead of waiting, and
-- nothing beyond the deleted rows is locked, so ingest and the relay never wait for a cleanup. The
-- state test is repeated as a constant list so no bound value can select a pending or processing row.
-- $1 state (text: processed or dead), $2 max age in milliseconds (bigint), $3 limit (int)
WITH doomed AS (
    SELECT i.{inbox.id} AS id
      FROM {inbox} i
     WHERE i.{inbox.state} = $1
       AND i.{inbox.state} IN ('processed', 'dead')
       AND i.{inbox.createdAt} < now() - $2 * interval '1 millisecond'
     ORDER BY i.{inbox.createdAt}
     LIMIT $3
     FOR UPDATE SKIP LOCKED
)
DELETE FROM {inbox} t
 USING doomed
 WHERE t.{inbox.id} = doomed.id
   AND t.{inbox.state} IN ('processed', 'dead')
