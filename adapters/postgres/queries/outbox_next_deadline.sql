-- Seconds until the earliest pending row falls due by itself (a retry, or a row written with a
-- later scheduled_at); null when none waits. Only the dispatcher of a replica with capture on asks,
-- once per idle pass: no insert wakes it for such a row. Reads the first entry of
-- idx_outbox_pending_scheduled past now.
SELECT EXTRACT(EPOCH FROM (min({outbox.scheduledAt}) - now()))::float8 AS seconds
  FROM {outbox}
 WHERE {outbox.state} = 'pending'
   AND {outbox.scheduledAt} > now()
