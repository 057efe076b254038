-- Returns a claimed row to pending after a delay and counts the failed attempt.
-- Parameters: :id (uuid), :token (uuid), :delay_ms (bigint), :error (text, secrets removed and
-- length cut before binding).
-- Zero rows affected: the claim is lost; do nothing more for this row.
UPDATE inbox
   SET state = 'pending',
       attempt = attempt + 1,
       scheduled_at = now() + CAST(:delay_ms AS bigint) * interval '1 millisecond',
       last_error = CAST(:error AS text),
       claim_token = NULL,
       lease_expires_at = NULL
 WHERE id = CAST(:id AS uuid)
   AND claim_token = CAST(:token AS uuid)
   AND state || '' = 'processing' -- not an index key: the row is found by its id alone
   AND lease_expires_at > now();
