-- Moves a claimed row to dead: no claim takes it again until an operator replays it.
-- Parameters: :id (uuid), :token (uuid), :error (text, secrets removed and length cut before
-- binding).
-- Zero rows affected: the claim is lost; do nothing more for this row.
UPDATE inbox
   SET state = 'dead',
       last_error = CAST(:error AS text),
       claim_token = NULL,
       lease_expires_at = NULL
 WHERE id = CAST(:id AS uuid)
   AND claim_token = CAST(:token AS uuid)
   AND state || '' = 'processing' -- not an index key: the row is found by its id alone
   AND lease_expires_at > now();
