-- V17: a QueueBox change to the documented schema (listed in features.md as a deviation).
--
-- Every state change of an outbox row writes a new row version with an entry in every index whose
-- filter the new version matches (the updates change `state`, which indexes hold, so none is a
-- HOT update). Two indexes took entries on that path that no statement reads:
--
-- * idx_outbox_topic held every row in every state: three entries a message (insert, claim,
--   finish). Nothing QueueBox runs reads it any more: the console finds the topics of dead rows in
--   idx_outbox_dead_topic (V16), replay walks the primary key. Dropped.
-- * idx_outbox_key_sequence held rows without a key too: two entries an unkeyed message (insert,
--   claim) that the keyed claim, which walks keys, never visits. It is replaced by
--   idx_outbox_keyed_sequence, the same columns over rows that have a key.
--
-- Measured (bench/run-schema-cost.sh, 200k-row HTTP drains, bench/journal/2026-12-04.md): 11 %
-- faster without keys and 10 % over 20,000 keys; PostgreSQL's CPU a message 17 % and 13 % lower.
--
-- Safe while older replicas run: their keyed claim uses the new index (its `key > $1` and
-- `key = $1` conditions imply `key IS NOT NULL`). On a large outbox the CREATE INDEX blocks inserts
-- while it builds: build it first with CREATE INDEX CONCURRENTLY outside a transaction under this
-- exact name (and drop the two old ones with DROP INDEX CONCURRENTLY); this file then finds all
-- three changes made. An operator who queries the outbox by topic may keep an index of their own
-- under another name.

CREATE INDEX IF NOT EXISTS idx_outbox_keyed_sequence
    ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing') AND key IS NOT NULL;

DROP INDEX IF EXISTS idx_outbox_key_sequence;

DROP INDEX IF EXISTS idx_outbox_topic;
