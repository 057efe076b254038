-- Console: dead inbox rows back to pending, as if never tried: attempt 0, due now, no error, no
-- claim. The state guard leaves alone a row another process moved since the operator chose it.
-- $1 ids (uuid[])
UPDATE {inbox}
   SET {inbox.state} = 'pending',
       {inbox.attempt} = 0,
       {inbox.scheduledAt} = now(),
       {inbox.lastError} = NULL,
       {inbox.claimedAt} = NULL,
       {inbox.claimToken} = NULL,
       {inbox.leaseExpiresAt} = NULL
 WHERE {inbox.id} = ANY($1::uuid[])
   AND {inbox.state} = 'dead'
