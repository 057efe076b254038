-- The pending gauges: rows per topic and the oldest pending row's age in seconds. Run at most once per
-- outbox.pendingGaugeIntervalMs by the dispatcher, never by a scrape.
SELECT {outbox.topic} AS topic,
       count(*) AS pending,
       EXTRACT(EPOCH FROM (now() - min({outbox.createdAt})))::float8 AS oldest_age_seconds
  FROM {outbox}
 WHERE {outbox.state} = 'pending'
 GROUP BY {outbox.topic}
