-- Extends the lease of rows still held, fenced on id, state, token and a live lease.
-- $1 ids (uuid[]), $2 tokens (uuid[]), $3 lease in milliseconds (bigint). Returns the 1-based
-- positions of the renewed inputs (by position, not id: see outbox_finish.sql).
UPDATE {outbox} t
   SET {outbox.leaseExpiresAt} = now() + $3 * interval '1 millisecond'
  FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS held(id, token, ord)
 WHERE t.{outbox.id} = held.id
   AND t.{outbox.claimToken} = held.token
   AND t.{outbox.state} = 'processing'
   AND t.{outbox.leaseExpiresAt} > now()
RETURNING held.ord
