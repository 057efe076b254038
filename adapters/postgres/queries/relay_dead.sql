-- Moves one claimed inbox row to dead with a reason, fenced on id, state, token and a live lease.
-- $1 id, $2 claim token, $3 reason. Returns the id when the fence held.
UPDATE {inbox}
   SET {inbox.state} = 'dead',
       {inbox.lastError} = $3,
       {inbox.claimToken} = NULL,
       {inbox.leaseExpiresAt} = NULL
 WHERE {inbox.id} = $1
   AND {inbox.claimToken} = $2
   AND {inbox.state} = 'processing'
   AND {inbox.leaseExpiresAt} > now()
RETURNING {inbox.id}
