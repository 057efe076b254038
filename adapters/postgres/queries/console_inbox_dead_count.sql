-- Console: how many dead inbox rows a filter selects. Parameters as console_outbox_dead_count.sql.
-- The dead rows come from idx_inbox_state_created and every filter is checked on them, the sources
-- too: `|| ''` keeps the source out of any index condition. Otherwise the planner intersects the
-- dead rows with every row of the sources from the unique (source, idempotency_key) index, which
-- reads an entry per processed row of the source: 8.7 ms against 1.7 ms at a million rows
-- (docs/operations/console-plans.md).
SELECT count(*) AS n
  FROM {inbox} i
 WHERE i.{inbox.state} = 'dead'
   AND ($1::text[] IS NULL OR i.{inbox.source} || '' = ANY($1::text[]))
   AND ($2::text IS NULL OR i.{inbox.idempotencyKey} = $2::text)
   AND ($3::timestamptz IS NULL OR i.{inbox.createdAt} >= $3::timestamptz)
   AND ($4::timestamptz IS NULL OR i.{inbox.createdAt} < $4::timestamptz)
   AND ($5::text IS NULL OR i.{inbox.lastError} ILIKE $5::text)
