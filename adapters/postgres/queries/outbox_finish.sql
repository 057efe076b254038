-- Ends many claims in one round trip, each fenced on its own id, state, token and a live lease.
-- A row that no longer matches is left alone: its claim was lost and it belongs to someone else.
-- $1 ids (uuid[]), $2 tokens (uuid[]), $3 end states (text[]: sent, pending for a retry, dead),
-- $4 new attempt (int[], NULL keeps it), $5 retry delay in milliseconds (bigint[], NULL for none),
-- $6 last_error (text[], NULL keeps it). Returns the 1-based positions of the inputs that changed a
-- row: by position, not by id, so that a stale write and the current owner's write of one row in the
-- same batch are told apart (only the current one applies and only it reports true).
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
  FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::bigint[], $6::text[])
       WITH ORDINALITY AS f(id, token, state, attempt, delay_ms, error, ord)
 WHERE t.{outbox.id} = f.id
   AND t.{outbox.claimToken} = f.token
   AND t.{outbox.state} = 'processing'
   AND t.{outbox.leaseExpiresAt} > now()
RETURNING f.ord
