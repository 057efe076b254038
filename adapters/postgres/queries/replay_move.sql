-- Moves one page of replayed rows back to pending, as a delivery that never happened: attempt 0,
-- due now, no error, no claim. The state guard leaves a row alone that another process moved since
-- the page was read. One statement per page keeps every transaction short.
-- $1 ids (uuid[])
UPDATE {outbox}
   SET {outbox.state} = 'pending',
       {outbox.attempt} = 0,
       {outbox.scheduledAt} = now(),
       {outbox.lastError} = NULL,
       {outbox.claimedAt} = NULL,
       {outbox.claimToken} = NULL,
       {outbox.leaseExpiresAt} = NULL,
       {outbox.updatedAt} = now()
 WHERE {outbox.id} = ANY($1::uuid[])
   AND {outbox.state} IN ('sent', 'dead')
