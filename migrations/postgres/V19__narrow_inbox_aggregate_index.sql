-- V19: a QueueBox change to the documented schema (listed in features.md as a deviation).
--
-- idx_inbox_aggregate_state (V2, (aggregate_id, state)) holds every inbox row. A message adds an
-- entry when it is stored and another at each change of its state (the claim and the finish change
-- `state`, so neither is a HOT update): three for a message relayed or pulled, more for one that is
-- retried or whose lease is renewed. Its one reader is the relay's keyed claim
-- (relay_claim_keyed.sql), which asks of each aggregate it walks whether a push row of it is
-- processing, and even that only sometimes: where few rows are processing the planner reads every
-- processing row once from idx_inbox_processing_claimed into a hash table instead. That index holds
-- the processing pull rows too, so where slow pull workers hold many rows under long leases the
-- planner probed idx_inbox_aggregate_state per aggregate, and without it would read every one of
-- those rows on every relay claim. Measured at a million rows, custom and generic plans alike: with
-- 200,000 pull rows processing the claim took 2.7-2.9 ms with the index and 42-52 ms without it;
-- with 50,000, 2.6-2.8 ms and 10.5-10.9 ms. Dropping it alone was not safe.
--
-- idx_inbox_push_busy answers the same question from the push rows being relayed and nothing else:
-- one entry a relayed message, at its claim (a stored row is pending and a finished one processed,
-- so neither enters it); a pulled message never enters it. With it the claim took 2.6-2.8 ms and
-- 2.7-2.9 ms in the two cases above, 11.5-12 ms instead of 16-17 ms on a backlog of 196,000 pending
-- and 28,000 processing push rows, and no more on the ordinary shape (2.7-2.8 ms against 3.2-3.4).
-- The relay's reclaim reads it too where many pull rows are processing (42-49 ms -> 0.3 ms beside
-- 200,000). Every other statement on the inbox planned the same with either index. A relayed
-- message now writes two index entries fewer, a pulled one three.
--
-- Safe while older replicas run: no statement needs the old index to work, and the previous
-- release's claim asks the same question, so it reads the new index too. On a large inbox build
-- the new index first with CREATE INDEX CONCURRENTLY under this name, then drop the old one with
-- DROP INDEX CONCURRENTLY (both outside a transaction), in that order so the claim always has an
-- index; this file then finds nothing left to do. Queries of your own by aggregate need an index
-- of your own.

CREATE INDEX IF NOT EXISTS idx_inbox_push_busy
    ON inbox (aggregate_id)
    WHERE state = 'processing' AND consumption = 'push';

DROP INDEX IF EXISTS idx_inbox_aggregate_state;
