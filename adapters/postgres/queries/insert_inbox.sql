-- One received inbox message. A repeat of (source, idempotency key) hits the unique constraint and
-- returns no row, which the caller reports as a duplicate. No conflict target is named, so a custom
-- table that lacks the constraint still accepts the insert (and then stores every repeat).
-- $1 id, $2 source, $3 idempotency key, $4 aggregate id, $5 event type, $6 payload (jsonb),
-- $7 headers (jsonb object), $8 correlation id, $9 consumption ('push' or 'pull'), $10 state
-- ('pending', or 'dead' for a broker message refused at receipt), $11 last_error (NULL unless dead).
INSERT INTO {inbox} (
    {inbox.id},
    {inbox.source},
    {inbox.idempotencyKey},
    {inbox.aggregateId},
    {inbox.eventType},
    {inbox.payload},
    {inbox.headers},
    {inbox.correlationId},
    {inbox.consumption},
    {inbox.state},
    {inbox.lastError}
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT DO NOTHING
RETURNING {inbox.id}
