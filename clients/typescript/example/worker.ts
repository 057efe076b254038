// A complete pull worker: it takes the rows of the "orders" pull source, writes each order into
// the application's own orders table and completes the inbox row in the same transaction.
//
//   npm run build && DATABASE_URL=postgres://queuebox:queuebox@127.0.0.1:5432/queuebox node dist/example/worker.js
//
// Ctrl+C (or SIGTERM) stops it: claims end at once, running handlers get the shutdown grace.
import pg from "pg";
import { InboxWorker, fromPg } from "@alternayte/queuebox-inbox";

const pool = new pg.Pool({ connectionString: process.env["DATABASE_URL"] });
// The business table of this example; a real application has its own.
await pool.query("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INT NOT NULL)");

const worker = new InboxWorker(fromPg(pool), {
  source: "orders",
  batchSize: 10,
  leaseMs: 30_000,
  pollIntervalMs: 200,
  shutdownGraceMs: 10_000,
  logger: console, // receives redacted lines only
});

const stop = new AbortController();
process.once("SIGINT", () => stop.abort());
process.once("SIGTERM", () => stop.abort());

await worker.run(async (message, tx) => {
  const order = message.payload as { id: string; total: number };
  if (typeof order?.id !== "string" || typeof order.total !== "number") {
    throw new Error(`order ${message.idempotencyKey} has no id and total`); // retried, then dead-lettered
  }
  // Through tx only: the worker commits this insert with the completion of the row.
  await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", [order.id, order.total]);
  console.log(`order ${order.id} stored (inbox row ${message.id}, attempt ${message.attempt})`);
}, stop.signal);

await pool.end();
