-- Optional. Hands back a claimed row that no handler has started, for a worker that claims more
-- rows than it runs at once and is stopping: the row is `pending` again at once, with the same
-- attempt and due time, instead of waiting for its lease to run out. Never use it for a row whose
-- handler ran (complete, retry or dead-letter that row instead).
-- Parameters: :id (uuid), :token (uuid).
-- Exactly one row affected: handed back. Zero rows: the claim was already lost; nothing to do.
UPDATE inbox
   SET state = 'pending',
       claim_token = NULL,
       lease_expires_at = NULL
 WHERE id = CAST(:id AS uuid)
   AND claim_token = CAST(:token AS uuid)
   AND state || '' = 'processing' -- not an index key: the row is found by its id alone
   AND lease_expires_at > now();
