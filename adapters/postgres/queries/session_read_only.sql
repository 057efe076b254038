-- Whether this session may write: on for a hot standby and for a server whose
-- default_transaction_read_only is on. A multi-host database.url skips such a host (connect.rs,
-- failover.rs); the check doubles as the liveness test of an idle connection.
SELECT pg_catalog.current_setting('transaction_read_only') = 'on'
