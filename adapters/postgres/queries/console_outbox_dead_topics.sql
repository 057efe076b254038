-- Console: every distinct topic of a dead outbox row, by a loose index scan of
-- idx_outbox_dead_topic (one probe per topic), so the dead list's destination filter never reads
-- the rows themselves.
WITH RECURSIVE topics(name) AS (
    SELECT min(o.{outbox.topic}) FROM {outbox} o WHERE o.{outbox.state} = 'dead'
    UNION ALL
    SELECT (SELECT min(o.{outbox.topic})
              FROM {outbox} o
             WHERE o.{outbox.state} = 'dead' AND o.{outbox.topic} > t.name)
      FROM topics t
     WHERE t.name IS NOT NULL
)
SELECT name::text AS name FROM topics WHERE name IS NOT NULL
