-- Console lookup: the inbox rows with one correlation id, newest first. No index of ours holds
-- correlation ids (one would add an entry to every stored message and every change of its state),
-- so this reads the whole inbox unless the operator added one (docs/operations/console.md).
-- $1 correlation id, $2 limit
SELECT i.{inbox.id} AS id, i.{inbox.source} AS grp, i.{inbox.idempotencyKey} AS key,
       i.{inbox.state} AS state, i.{inbox.attempt} AS attempt, i.{inbox.lastError} AS last_error,
       i.{inbox.createdAt} AS created_at, i.{inbox.createdAt} AS changed_at
  FROM {inbox} i
 WHERE i.{inbox.correlationId} = $1::text
 ORDER BY i.{inbox.createdAt} DESC
 LIMIT $2
