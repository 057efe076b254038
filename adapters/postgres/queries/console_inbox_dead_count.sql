-- Console: how many dead inbox rows a filter selects. Parameters as console_outbox_dead_count.sql.
SELECT count(*) AS n
  FROM {inbox} i
 WHERE i.{inbox.state} = 'dead'
   AND ($1::text[] IS NULL OR i.{inbox.source} = ANY($1::text[]))
   AND ($2::text IS NULL OR i.{inbox.idempotencyKey} = $2::text)
   AND ($3::timestamptz IS NULL OR i.{inbox.createdAt} >= $3::timestamptz)
   AND ($4::timestamptz IS NULL OR i.{inbox.createdAt} < $4::timestamptz)
   AND ($5::text IS NULL OR i.{inbox.lastError} ILIKE $5::text)
