-- Console overview: pending, processing and dead outbox rows per topic, and the age of the oldest
-- pending row of each topic. Three branches so each state is read through its own partial index
-- (idx_outbox_pending_scheduled, idx_outbox_processing_claimed, idx_outbox_finished_updated); sent
-- rows, usually most of the table, are never read.
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
