-- Serialises migration runs of every QueueBox process on this database. A session lock, held on
-- one connection for the whole run, so a second process waits and then finds everything recorded.
SELECT pg_advisory_lock($1)
