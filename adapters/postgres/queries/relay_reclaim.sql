-- Returns relay claims whose lease passed to pending; the next claim takes them with a new token.
-- Push rows only: a pull claim takes over an expired pull row itself. A row claimed without a lease
-- counts from its claim time. $1 lease ms (bigint).
UPDATE {inbox}
   SET {inbox.state} = 'pending',
       {inbox.claimToken} = NULL,
       {inbox.leaseExpiresAt} = NULL
 WHERE {inbox.state} = 'processing'
   AND {inbox.consumption} = 'push'
   AND COALESCE({inbox.leaseExpiresAt}, {inbox.claimedAt} + $1 * interval '1 millisecond') < now()
