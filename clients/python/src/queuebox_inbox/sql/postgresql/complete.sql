-- Marks a claimed row processed. Run it inside the transaction that holds the business writes.
-- Parameters: :id (uuid), :token (uuid).
-- Exactly one row affected: commit. Zero rows: the claim is lost, so roll the WHOLE transaction
-- back (the business writes too); the new owner will do the work.
UPDATE inbox
   SET state = 'processed',
       processed_at = now(),
       claim_token = NULL,
       lease_expires_at = NULL
 WHERE id = CAST(:id AS uuid)
   AND claim_token = CAST(:token AS uuid)
   AND state || '' = 'processing' -- not an index key: the row is found by its id alone
   AND lease_expires_at > now();
