-- V16: a QueueBox addition beyond the eleven documented versions (listed in features.md).
--
-- One index for the operator console (docs/operations/console.md): the dead outbox rows by topic
-- and creation time. The overview counts dead rows per topic from this index alone (an index-only
-- scan, no table page read), and the dead-letter list narrows a topic filter or a creation-time
-- range with it. The other console views use indexes the delivery path already has.
--
-- Partial on state = 'dead': a row enters it only when it goes dead, which a healthy system
-- rarely does. Writing, claiming, retrying and sending a row never touch it, so the delivery path
-- pays nothing for it; replaying a dead row removes its entry at the next vacuum.
--
-- Safe to apply while old replicas run: it adds an index and nothing else. On a large outbox, build
-- it first with CREATE INDEX CONCURRENTLY outside a transaction; this file then finds it.

CREATE INDEX IF NOT EXISTS idx_outbox_dead_topic
    ON outbox (topic, created_at)
    WHERE state = 'dead';
