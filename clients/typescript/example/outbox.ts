// Writing an outbox row in the application's own transaction, and from inside an inbox handler
// (the message then commits with the inbox completion). Compiled by `npm run build`, so the
// README's calls are type-checked against pg's client and the handler's transaction.
import pg from "pg";
import { InboxWorker, OutboxWriter, fromPg, writeOutbox } from "@alternayte/queuebox-inbox";

export async function placeOrder(pool: pg.Pool, id: string, total: number): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [id, total]);
    const rowId = await writeOutbox(client, {
      topic: "order.created",
      key: id,
      payload: { id, total },
      headers: { "x-correlation-id": "checkout-7f3a" },
    });
    await client.query("COMMIT");
    return rowId;
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    client.release();
  }
}

export function forwardPayments(pool: pg.Pool, signal: AbortSignal): Promise<void> {
  const writer = new OutboxWriter({ schema: { table: "outbox" } });
  const worker = new InboxWorker(fromPg(pool), { source: "payments" });
  return worker.run(async (message, tx) => {
    await writer.write(tx, {
      topic: "payment.received",
      key: message.aggregateId ?? null,
      payload: Buffer.from(JSON.stringify(message.payload)), // already-encoded JSON
    });
  }, signal);
}
