-- Extends the lease of a claimed row. Renew every third of the lease while the handler runs.
-- Parameters: :id (uuid), :token (uuid), :lease_ms (bigint).
-- Exactly one row affected: the lease is extended. Zero rows: the claim is lost (another worker
-- took the row after the lease ran out); stop the handler and write nothing more for this row.
UPDATE inbox
   SET lease_expires_at = now() + CAST(:lease_ms AS bigint) * interval '1 millisecond'
 WHERE id = CAST(:id AS uuid)
   AND claim_token = CAST(:token AS uuid)
   AND state || '' = 'processing' -- not an index key: the row is found by its id alone
   AND lease_expires_at > now();
