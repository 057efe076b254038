-- Console: one page of dead inbox rows, newest first, walking idx_inbox_state_created
-- (state, created_at) backwards from the cursor. Parameters as console_outbox_dead_page.sql, with
-- sources for topics and the idempotency key for the key.
SELECT i.{inbox.id} AS id, i.{inbox.source} AS grp, i.{inbox.idempotencyKey} AS key,
       i.{inbox.state} AS state, i.{inbox.attempt} AS attempt, i.{inbox.lastError} AS last_error,
       i.{inbox.createdAt} AS created_at, i.{inbox.createdAt} AS changed_at
  FROM {inbox} i
 WHERE i.{inbox.state} = 'dead'
   AND ($1::timestamptz IS NULL OR (i.{inbox.createdAt}, i.{inbox.id}) < ($1::timestamptz, $2::uuid))
   AND ($3::text[] IS NULL OR i.{inbox.source} = ANY($3::text[]))
   AND ($4::text IS NULL OR i.{inbox.idempotencyKey} = $4::text)
   AND ($5::timestamptz IS NULL OR i.{inbox.createdAt} >= $5::timestamptz)
   AND ($6::timestamptz IS NULL OR i.{inbox.createdAt} < $6::timestamptz)
   AND ($7::text IS NULL OR i.{inbox.lastError} ILIKE $7::text)
 ORDER BY i.{inbox.createdAt} DESC, i.{inbox.id} DESC
 LIMIT $8
