-- One page of the rows a replay may move: state sent or dead, matching every filter that is set
-- (a NULL parameter is a filter that is not set), from the cursor on, in id order. The cursor is a
-- plain range condition on the primary key, never hidden in an OR, so every plan (also the generic
-- plan of a prepared statement) starts the index walk at the cursor: a page costs the rows it
-- passes over and a whole replay one pass over the table. A plain read takes no row lock.
-- $1 cursor id (uuid: the nil uuid for the first page), $2 whether the cursor id itself belongs to
-- the page (true only for the first page), $3 ids (uuid[]), $4 topic (text), $5 topics (text[]),
-- $6 created after (timestamptz), $7 created before (timestamptz), $8 limit (int)
SELECT o.{outbox.id} AS id, o.{outbox.topic} AS topic
  FROM {outbox} o
 WHERE o.{outbox.state} IN ('sent', 'dead')
   AND o.{outbox.id} >= $1::uuid
   AND (o.{outbox.id} <> $1::uuid OR $2::boolean)
   AND ($3::uuid[] IS NULL OR o.{outbox.id} = ANY($3::uuid[]))
   AND ($4::text IS NULL OR o.{outbox.topic} = $4::text)
   AND ($5::text[] IS NULL OR o.{outbox.topic} = ANY($5::text[]))
   AND ($6::timestamptz IS NULL OR o.{outbox.createdAt} > $6::timestamptz)
   AND ($7::timestamptz IS NULL OR o.{outbox.createdAt} < $7::timestamptz)
 ORDER BY o.{outbox.id}
 LIMIT $8
