-- Console overview: pending, processing and dead inbox rows per source and consumption mode, and
-- the age of the oldest pending row. Processed rows are never read (idx_inbox_state_created).
SELECT i.{inbox.source} AS grp, i.{inbox.consumption} AS consumption, i.{inbox.state} AS state,
       count(*) AS n,
       CASE WHEN i.{inbox.state} = 'pending'
            THEN EXTRACT(EPOCH FROM (now() - min(i.{inbox.createdAt})))::float8 END AS oldest
  FROM {inbox} i
 WHERE i.{inbox.state} IN ('pending', 'processing', 'dead')
 GROUP BY i.{inbox.source}, i.{inbox.consumption}, i.{inbox.state}
