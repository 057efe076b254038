-- Forwards a batch of claimed inbox rows into the outbox, in one statement and so one transaction.
--
-- `done` marks each inbox row processed, fenced on its id, state processing, its claim token and a
-- live lease. `inserted` writes an outbox row only for the inputs that `done` returned, so a row whose
-- fence failed (its claim was lost) writes no outbox row, and a failure of either part writes
-- nothing of the batch. A data-modifying WITH part runs once and to completion even though the
-- final SELECT does not read it.
-- $1 inbox ids (uuid[]), $2 claim tokens (uuid[]), $3 topics (text[]), $4 keys (text[]),
-- $5 payloads (text[], JSON), $6 headers (text[], JSON objects), $7 max attempts (int[]).
-- Returns the 1-based positions of the forwarded inputs (by position: see outbox_finish.sql).
WITH input AS (
    SELECT *
      FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])
           WITH ORDINALITY AS f(inbox_id, token, topic, key, payload, headers, max_attempts, ord)
),
done AS (
    UPDATE {inbox} t
       SET {inbox.state} = 'processed',
           {inbox.processedAt} = now(),
           {inbox.claimToken} = NULL,
           {inbox.leaseExpiresAt} = NULL
      FROM input f
     WHERE t.{inbox.id} = f.inbox_id
       AND t.{inbox.claimToken} = f.token
       AND t.{inbox.state} = 'processing'
       AND t.{inbox.leaseExpiresAt} > now()
 RETURNING f.ord
),
inserted AS (
    INSERT INTO {outbox} (
        {outbox.topic},
        {outbox.key},
        {outbox.payload},
        {outbox.headers},
        {outbox.maxAttempts}
    )
    SELECT f.topic, f.key, f.payload::jsonb, f.headers::jsonb, f.max_attempts
      FROM input f
      JOIN done d ON d.ord = f.ord
     ORDER BY f.ord
    RETURNING 1
)
SELECT ord FROM done
