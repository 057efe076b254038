-- Console: how many dead outbox rows a filter selects (the confirmation of a replay). Same filters
-- as console_outbox_dead_page.sql, without the cursor.
-- $1 topics (text[]), $2 key, $3 created from, $4 created before, $5 error pattern
SELECT count(*) AS n
  FROM {outbox} o
 WHERE o.{outbox.state} = 'dead'
   AND ($1::text[] IS NULL OR o.{outbox.topic} = ANY($1::text[]))
   AND ($2::text IS NULL OR o.{outbox.key} = $2::text)
   AND ($3::timestamptz IS NULL OR o.{outbox.createdAt} >= $3::timestamptz)
   AND ($4::timestamptz IS NULL OR o.{outbox.createdAt} < $4::timestamptz)
   AND ($5::text IS NULL OR o.{outbox.lastError} ILIKE $5::text)
