// The README's example (example/worker.ts, built to dist/example/worker.js) runs as a program:
// it stores the order and completes the inbox row in one transaction, and stops on SIGINT.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import pg from "pg";

const repo = new URL("../../../", import.meta.url);

test("the example worker stores an order and completes its row", { timeout: 60_000 }, async () => {
  const url = process.env.QB_TEST_PG_URL;
  assert.ok(url, "QB_TEST_PG_URL is not set");
  const name = `qb_example_ts_${randomBytes(8).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  const db = new pg.Client({ connectionString: target.toString() });
  let child;
  try {
    await db.connect();
    const dir = new URL("migrations/postgres/", repo);
    const files = readdirSync(dir).filter((f) => /^V\d+__.*\.sql$/.test(f))
      .sort((a, b) => Number(a.slice(1).split("__")[0]) - Number(b.slice(1).split("__")[0]));
    for (const f of files) await db.query(readFileSync(new URL(f, dir), "utf8"));
    await db.query(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
                    VALUES ('orders', 'evt-1', '{"id": "A-1", "total": 42}', 'pull')`);

    child = spawn(process.execPath, [new URL("../dist/example/worker.js", import.meta.url).pathname], {
      env: { ...process.env, DATABASE_URL: target.toString() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => { output += d; });
    child.stderr.on("data", (d) => { output += d; });
    const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

    const until = Date.now() + 30_000;
    for (;;) {
      const r = await db.query("SELECT state FROM inbox WHERE idempotency_key = 'evt-1'");
      if (r.rows[0]?.state === "processed") break;
      assert.ok(Date.now() < until, `the row was not processed in 30 s; output:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const orders = await db.query("SELECT id, total FROM orders");
    assert.deepEqual(orders.rows, [{ id: "A-1", total: 42 }]);

    child.kill("SIGINT");
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const { code } = await exited;
    clearTimeout(timer);
    assert.equal(code, 0, `the example exited with ${code}; output:\n${output}`);
    assert.match(output, /order A-1 stored/);
  } finally {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    await db.end().catch(() => {});
    // Closed even when the drop fails: left open, it kept this file's process alive and the test
    // run never ended.
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => admin.end());
  }
});
