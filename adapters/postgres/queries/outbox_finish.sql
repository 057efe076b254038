-- Ends many claims in one round trip, each fenced on its own id, state, token and a live lease.
-- A row that no longer matches is left alone: its claim was lost and it belongs to someone else.
-- $1 ids (uuid[]), $2 tokens (uuid[]), $3 end states (text[]: sent, pending for a retry, dead),
-- $4 new attempt (int[], NULL keeps it), $5 retry delay in milliseconds (bigint[], NULL for none),
-- $6 last_error (text[], NULL keeps it). Returns the 1-based positions of the inputs that changed a
-- row: by position, not by id, so that a stale write and the current owner's write of one row in the
-- same batch are told apart (only the current one applies and only it reports true).
--
-- Why the fence compares with columns of the input (`held`, `at`) and not with constants: written as
-- `state = 'processing'`, the planner may read the partial index of processing rows and join it with
-- the input. That index keeps the entry of every row finished since the last VACUUM until a scan can
-- drop it (never while an older transaction is open), so the statement's cost grew with the rows
-- finished before it; and `lease_expires_at > now()`, estimated from an ANALYZE taken while no row
-- held a lease, made the planner expect one row and pick a nested loop over the input for each row.
-- With both checks comparing against the (not flattened, OFFSET 0) input they are join conditions:
-- the only condition on the table is `id = ANY($1)`, so the rows are found by probing the primary
-- key with the batch's ids, O(batch) whatever the table holds or its statistics say. The fence
-- itself is unchanged: id, token, state and a live lease on the database clock.
UPDATE {outbox} t
   SET {outbox.state} = f.state,
       {outbox.attempt} = COALESCE(f.attempt, t.{outbox.attempt}),
       {outbox.scheduledAt} = CASE
           WHEN f.delay_ms IS NULL THEN t.{outbox.scheduledAt}
           ELSE now() + f.delay_ms * interval '1 millisecond'
       END,
       {outbox.lastError} = COALESCE(f.error, t.{outbox.lastError}),
       {outbox.claimToken} = NULL,
       {outbox.leaseExpiresAt} = NULL,
       {outbox.updatedAt} = now()
  FROM (SELECT u.*, 'processing'::text AS held, now() AS at
          FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::bigint[], $6::text[])
               WITH ORDINALITY AS u(id, token, state, attempt, delay_ms, error, ord)
        OFFSET 0) f
 WHERE t.{outbox.id} = ANY($1::uuid[])
   AND t.{outbox.id} = f.id
   AND t.{outbox.claimToken} = f.token
   AND t.{outbox.state} = f.held
   AND t.{outbox.leaseExpiresAt} > f.at
RETURNING f.ord
