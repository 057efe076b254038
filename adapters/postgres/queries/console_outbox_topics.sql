-- Console: every distinct outbox topic, by a loose index scan of idx_outbox_topic (one probe per
-- topic), so the destination filter never reads the rows themselves.
WITH RECURSIVE topics(name) AS (
    SELECT min(o.{outbox.topic}) FROM {outbox} o
    UNION ALL
    SELECT (SELECT min(o.{outbox.topic}) FROM {outbox} o WHERE o.{outbox.topic} > t.name)
      FROM topics t
     WHERE t.name IS NOT NULL
)
SELECT name::text AS name FROM topics WHERE name IS NOT NULL
