-- One outbox row, as the relay and the tests write it. State, attempt, the claim columns and the
-- timestamps other than scheduled_at keep their defaults; the database fills the sequence.
-- $1 id, $2 topic, $3 key, $4 aggregate type, $5 payload (jsonb), $6 headers (jsonb object),
-- $7 max attempts, $8 scheduled at (NULL: now, by the database clock).
INSERT INTO {outbox} (
    {outbox.id},
    {outbox.topic},
    {outbox.key},
    {outbox.aggregateType},
    {outbox.payload},
    {outbox.headers},
    {outbox.maxAttempts},
    {outbox.scheduledAt}
)
VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, CURRENT_TIMESTAMP))
RETURNING {outbox.id}, {outbox.sequence}
