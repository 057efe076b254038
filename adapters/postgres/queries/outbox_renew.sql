-- Extends the lease of rows still held, fenced on id, state, token and a live lease.
-- $1 ids (uuid[]), $2 tokens (uuid[]), $3 lease in milliseconds (bigint). Returns the renewed ids.
UPDATE {outbox} t
   SET {outbox.leaseExpiresAt} = now() + $3 * interval '1 millisecond'
  FROM unnest($1::uuid[], $2::uuid[]) AS held(id, token)
 WHERE t.{outbox.id} = held.id
   AND t.{outbox.claimToken} = held.token
   AND t.{outbox.state} = 'processing'
   AND t.{outbox.leaseExpiresAt} > now()
RETURNING t.{outbox.id}
