-- Console overview: pending, processing and dead outbox rows per topic, and the age of the oldest
-- pending row of each topic. One part per state, each written with the predicate of the partial
-- index that holds exactly that state's rows, so sent rows, usually most of the table, are never
-- read, and no index exists for this count alone:
-- - pending: idx_outbox_pending_scheduled (the claim's index), then the table page of each
--   pending row for its topic and creation time;
-- - processing: idx_outbox_processing_claimed (the reclaim's index; as many rows as are in flight);
-- - dead: idx_outbox_dead_topic (V16, dead rows only), an index-only scan.
SELECT o.{outbox.topic} AS grp, 'pending' AS state, count(*) AS n,
       EXTRACT(EPOCH FROM (now() - min(o.{outbox.createdAt})))::float8 AS oldest
  FROM {outbox} o
 WHERE o.{outbox.state} = 'pending'
 GROUP BY o.{outbox.topic}
UNION ALL
SELECT o.{outbox.topic}, 'processing', count(*), NULL::float8
  FROM {outbox} o
 WHERE o.{outbox.state} = 'processing'
 GROUP BY o.{outbox.topic}
UNION ALL
SELECT o.{outbox.topic}, 'dead', count(*), NULL::float8
  FROM {outbox} o
 WHERE o.{outbox.state} = 'dead'
 GROUP BY o.{outbox.topic}
