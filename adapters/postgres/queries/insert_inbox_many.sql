-- A group of received inbox messages in one statement (and so one commit): the ingest path queues
-- the requests that arrive while a statement runs and inserts them together. Each parameter is an
-- array with one element per message, in the same order; the caller sorts the group by (source,
-- idempotency key) so two groups sharing keys take their index locks in the same order and cannot
-- deadlock. A repeat of a stored (source, key), or a second message of one key within the group,
-- is skipped by ON CONFLICT DO NOTHING and returns no row; the caller matches the returned ids to
-- its messages (RETURNING promises no order). Payload and headers travel as JSON text.
-- $1 ids, $2 sources, $3 idempotency keys, $4 aggregate ids, $5 event types, $6 payloads, $7 headers
-- (JSON objects), $8 correlation ids, $9 consumptions, $10 states, $11 last errors.
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
SELECT
    m.id,
    m.source,
    m.idempotency_key,
    m.aggregate_id,
    m.event_type,
    m.payload::jsonb,
    m.headers::jsonb,
    m.correlation_id,
    m.consumption,
    m.state,
    m.last_error
FROM unnest(
    $1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $8::text[], $9::text[], $10::text[], $11::text[]
) AS m (
    id, source, idempotency_key, aggregate_id, event_type, payload, headers,
    correlation_id, consumption, state, last_error
)
ON CONFLICT DO NOTHING
RETURNING {inbox.id}
