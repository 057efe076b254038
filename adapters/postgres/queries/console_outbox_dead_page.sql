-- Console: one page of dead outbox rows, most recently changed first, walking
-- idx_outbox_finished_updated (state, updated_at, id) backwards from the cursor. A NULL parameter
-- is a filter that is not set; the statement is planned with its values, so an unset filter costs
-- nothing. The error text arrives as a LIKE pattern whose wildcards the caller escaped.
-- $1 cursor time, $2 cursor id, $3 topics (text[]), $4 key, $5 created from, $6 created before,
-- $7 error pattern, $8 limit
SELECT o.{outbox.id} AS id, o.{outbox.topic} AS grp, o.{outbox.key} AS key,
       o.{outbox.state} AS state, o.{outbox.attempt} AS attempt, o.{outbox.lastError} AS last_error,
       o.{outbox.createdAt} AS created_at, o.{outbox.updatedAt} AS changed_at
  FROM {outbox} o
 WHERE o.{outbox.state} = 'dead'
   AND ($1::timestamptz IS NULL OR (o.{outbox.updatedAt}, o.{outbox.id}) < ($1::timestamptz, $2::uuid))
   AND ($3::text[] IS NULL OR o.{outbox.topic} = ANY($3::text[]))
   AND ($4::text IS NULL OR o.{outbox.key} = $4::text)
   AND ($5::timestamptz IS NULL OR o.{outbox.createdAt} >= $5::timestamptz)
   AND ($6::timestamptz IS NULL OR o.{outbox.createdAt} < $6::timestamptz)
   AND ($7::text IS NULL OR o.{outbox.lastError} ILIKE $7::text)
 ORDER BY o.{outbox.updatedAt} DESC, o.{outbox.id} DESC
 LIMIT $8
