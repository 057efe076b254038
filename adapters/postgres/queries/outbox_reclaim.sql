-- Returns claims whose lease passed to pending, so the next claim takes them with a new token.
-- A row claimed by a release that set no lease counts from its claim time. $1 lease ms (bigint).
UPDATE {outbox}
   SET {outbox.state} = 'pending',
       {outbox.claimToken} = NULL,
       {outbox.leaseExpiresAt} = NULL,
       {outbox.updatedAt} = now()
 WHERE {outbox.state} = 'processing'
   AND COALESCE({outbox.leaseExpiresAt}, {outbox.claimedAt} + $1 * interval '1 millisecond') < now()
