// Pull-claim throughput of the TypeScript pull client (clients/typescript), the counterpart of
// pullbench (Rust): WORKERS InboxWorkers on one source in one Node.js process, one pg pool, a
// no-op handler, run until EXPECT rows were handled (or TIMEOUT seconds). Needs the client built
// (cd clients/typescript && npm ci && npm run build); pg comes from that package's node_modules.
//
// Prints the lines of pullbench: `handled=N rate=R first_ms=F wall_ms=W processed=P left=L
// timed_out=B`, rate = (N-1) / (time of the N-th handler call - time of the 1st), then `cpu
// worker_cpu_ms=.. pg_cpu_ms=.. worker_us_per_row=.. pg_us_per_row=..`.
//
//   node bench.mjs --url URL --source S --expect N [--workers 4] [--batch 10] [--concurrency 1] [--timeout 120]
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const client = new URL("../../../clients/typescript/", import.meta.url);
const pg = createRequire(new URL("package.json", client))("pg");
const { InboxWorker, fromPg } = await import(new URL("dist/esm/index.js", client).href);

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const url = arg("--url", "postgres://queuebox:queuebox@127.0.0.1:5432/queuebox");
const source = arg("--source", "bench");
const expect = Number(arg("--expect", "50000"));
const workers = Number(arg("--workers", "4"));
const batchSize = Number(arg("--batch", "10"));
const maxConcurrency = Number(arg("--concurrency", "1"));
const timeout = Number(arg("--timeout", "120"));

// Each worker: one claim connection, one per running handler, and renewals.
const size = workers * (maxConcurrency + 1) + 2;
const pool = new pg.Pool({ connectionString: url, max: size, min: size, idleTimeoutMillis: 0 });
const started = process.hrtime.bigint();
const since = () => Number(process.hrtime.bigint() - started);
let handled = 0, firstNs = 0, lastNs = 0;
const stop = new AbortController();
const runs = [];
for (let i = 0; i < workers; i++) {
  const worker = new InboxWorker(fromPg(pool), { source, batchSize, maxConcurrency, pollIntervalMs: 100, shutdownGraceMs: 10_000 });
  runs.push(worker.run(async () => {
    handled++;
    const now = since();
    if (handled === 1) firstNs = now;
    if (handled === expect) {
      lastNs = now;
      stop.abort();
    }
  }, stop.signal));
}
let timer;
const timedOut = await Promise.race([
  new Promise((resolve) => stop.signal.addEventListener("abort", () => resolve(false), { once: true })),
  new Promise((resolve) => { timer = setTimeout(() => resolve(true), timeout * 1000); }),
]);
clearTimeout(timer);
const cutNs = since(), handledAtCut = handled;
stop.abort();
await Promise.all(runs);
const wall = since();

const [last, counted] = timedOut ? [cutNs, handledAtCut] : [lastNs, expect];
const span = (last - firstNs) / 1e9;
const rate = span > 0 ? (counted - 1) / span : 0;
const ticks = (pid) => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 1).trim().split(/\s+/);
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
};
const workerTicks = ticks("self");
const pids = (await pool.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")).rows;
const pgTicks = pids.reduce((sum, r) => sum + ticks(r.pid), 0);
const counts = (await pool.query(
  "SELECT count(*) FILTER (WHERE state = 'processed') AS processed, count(*) FILTER (WHERE state <> 'processed') AS left FROM inbox WHERE source = $1",
  [source],
)).rows[0];
await pool.end();
console.log(`handled=${handled} rate=${rate.toFixed(0)} first_ms=${Math.round(firstNs / 1e6)} wall_ms=${Math.round(wall / 1e6)} processed=${counts.processed} left=${counts.left} timed_out=${timedOut}`);
// Linux reports 100 ticks a second (USER_HZ).
const [wms, pms] = [workerTicks * 10, pgTicks * 10];
const perRow = (ms) => (handled > 0 ? (ms * 1000) / handled : 0).toFixed(0);
console.log(`cpu worker_cpu_ms=${wms} pg_cpu_ms=${pms} worker_us_per_row=${perRow(wms)} pg_us_per_row=${perRow(pms)}`);
