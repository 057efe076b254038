-- Serialises the relay claim across every replica for the rest of the claim transaction.
--
-- Keyed on the inbox table name ($1, the configured name as text). Without this lock two replicas
-- can each see no processing row of an aggregate and each claim one of its rows. It runs as its own
-- statement before the claim: under READ COMMITTED the claim then takes its snapshot after the lock
-- is granted, so it sees the claims the previous holder committed. Released at commit.
SELECT pg_advisory_xact_lock(hashtext($1))
