// The outbox-writer conformance runner: every scenario of clients/conformance/writer-scenarios.json
// against a fresh PostgreSQL database (QB_TEST_PG_URL), through the package's public API (the built
// ESM output), with the real queuebox binary delivering what the writer wrote. Rust, Go and Python
// run the same file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import pg from "pg";
import { OutboxRefusedError, OutboxWriter } from "@alternayte/queuebox-inbox";

const RUNNER = "typescript";
const repo = new URL("../../../", import.meta.url);
const suite = JSON.parse(readFileSync(new URL("clients/conformance/writer-scenarios.json", repo), "utf8"));
const timeoutMs = suite.defaults.timeout_ms;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function text(value) {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && "repeat" in value) return value.repeat.repeat(value.times);
  return value; // a value of the wrong type, passed on as it is
}

const CAMEL = {
  namespace: "namespace", table: "table", id: "id", topic: "topic", key: "key",
  aggregate_type: "aggregateType", payload: "payload", headers: "headers",
  max_attempts: "maxAttempts", scheduled_at: "scheduledAt",
};

function schemaOf(mapping = {}) {
  const schema = {};
  for (const [field, name] of Object.entries(mapping)) {
    assert.ok(field in CAMEL, `unknown schema field ${field}`);
    schema[CAMEL[field]] = text(name);
  }
  return schema;
}

function messageOf(write) {
  const message = { topic: text(write.topic) };
  if ("payload_text" in write) message.payload = Buffer.from(text(write.payload_text), "utf8");
  else if ("payload" in write) message.payload = write.payload;
  else assert.fail("a write has a payload");
  if ("key" in write) message.key = text(write.key);
  if ("aggregate_type" in write) message.aggregateType = text(write.aggregate_type);
  if ("headers" in write) message.headers = write.headers;
  if ("max_attempts" in write) message.maxAttempts = write.max_attempts;
  if ("scheduled_in_ms" in write) message.scheduledAt = new Date(Date.now() + write.scheduled_in_ms);
  if ("traceparent" in write) message.traceparent = write.traceparent;
  if ("tracestate" in write) message.tracestate = write.tracestate;
  return message;
}

function migrations() {
  const dir = new URL("migrations/postgres/", repo);
  return readdirSync(dir)
    .filter((f) => /^V\d+__.*\.sql$/.test(f))
    .sort((a, b) => Number(a.slice(1).split("__")[0]) - Number(b.slice(1).split("__")[0]))
    .map((f) => readFileSync(new URL(f, dir), "utf8"));
}

async function withDatabase(fn) {
  const url = process.env.QB_TEST_PG_URL;
  assert.ok(url, "QB_TEST_PG_URL is not set: start PostgreSQL and export it with `eval \"$(bash scripts/services.sh)\"` from the repository root");
  const name = `qb_writer_ts_${randomBytes(8).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: target.toString(), max: 5 });
  // An idle connection that the server ends (the drop below, or an operator) must not crash the run.
  pool.on("error", () => {});
  try {
    for (const sql of migrations()) await pool.query(sql);
    await pool.query("CREATE TABLE conformance_writes (key TEXT NOT NULL)");
    await fn(pool, target.toString());
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => admin.end());
  }
}

function binary() {
  const tried = [];
  if (process.env.QB_BIN) tried.push(process.env.QB_BIN);
  if (process.env.CARGO_TARGET_DIR) tried.push(join(process.env.CARGO_TARGET_DIR, "debug", "queuebox"));
  tried.push(fileURLToPath(new URL("target/debug/queuebox", repo)));
  const found = tried.find((p) => existsSync(p) && statSync(p).isFile());
  assert.ok(found, `the queuebox binary was not found (tried ${tried.join(", ")}): build it with \`cargo build -p queuebox\``);
  return found;
}

async function scalar(pool, sql) {
  const { rows } = await pool.query({ text: sql, rowMode: "array" });
  const value = rows[0]?.[0];
  return value === null || value === undefined ? "<null>" : String(value);
}

async function pollUntil(deadlineMs, check) {
  const until = Date.now() + deadlineMs;
  let lastError;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > until) {
      throw new Error(`timed out after ${deadlineMs} ms${lastError ? ` (last error: ${lastError.message})` : ""}`);
    }
    await sleep(50);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function runBinary(pool, databaseUrl, sc, committed) {
  const received = [];
  const receiver = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") });
      response.writeHead(200, { "content-length": "0" });
      response.end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const dir = mkdtempSync(join(tmpdir(), "qb-writer-ts-"));
  let child;
  let stderr = "";
  try {
    const lines = [
      "server:",
      `  httpPort: ${await freePort()}`,
      "database:",
      `  url: ${JSON.stringify(databaseUrl)}`,
      "  migrate: false",
      ...(sc.binary.database ?? []).map((line) => `  ${line}`),
      "outbox:",
      "  pollIntervalMs: 50",
      "destinations:",
      "  hook:",
      "    type: http",
      `    baseUrl: http://127.0.0.1:${receiver.address().port}`,
      "    path: /events",
      "routes:",
      '  - topicPattern: "**"',
      "    destination: hook",
    ];
    const config = join(dir, "queuebox.yml");
    writeFileSync(config, `${lines.join("\n")}\n`);
    child = spawn(binary(), [], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", QUEUEBOX_CONFIG_FILE: config },
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr.on("data", (chunk) => { stderr += chunk; });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    const deliveries = sc.expect?.deliveries;
    const settled = deliveries?.settled_sql ?? "SELECT true";
    try {
      await pollUntil(timeoutMs, async () => (await scalar(pool, settled)) === "true");
    } catch (error) {
      throw new Error(`${settled}: ${error.message}\nqueuebox stderr:\n${stderr}`);
    } finally {
      child.kill("SIGTERM");
      const stopped = await Promise.race([exited.then(() => true), sleep(20_000).then(() => false)]);
      if (!stopped) child.kill("SIGKILL");
    }
    if (deliveries === undefined) return;

    const byKey = new Map();
    for (const r of received) {
      const key = r.headers["x-message-key"] ?? "";
      if (!byKey.has(key)) byKey.set(key, []);
      byKey.get(key).push(r);
      assert.ok(committed.includes(r.headers["x-message-id"]), `a delivery carries X-Message-Id ${r.headers["x-message-id"]}, which no committed write returned`);
    }
    for (const key of byKey.keys()) assert.ok(key in deliveries.by_key, `deliveries for the unexpected key ${JSON.stringify(key)}`);
    for (const [key, want] of Object.entries(deliveries.by_key)) {
      const have = byKey.get(key) ?? [];
      assert.equal(have.length, want.length, `key ${key}: ${have.length} deliveries, expected ${want.length}: ${have.map((r) => r.body).join(" | ")}`);
      want.forEach((w, i) => {
        const r = have[i];
        assert.equal(r.headers["x-topic"], w.topic, `key ${key} delivery ${i}: topic`);
        const body = JSON.parse(r.body);
        assert.ok(isDeepStrictEqual(body, w.body), `key ${key} delivery ${i}: body ${r.body}, expected ${JSON.stringify(w.body)}`);
        for (const [name, value] of Object.entries(w.headers ?? {})) {
          assert.equal(r.headers[name.toLowerCase()], value, `key ${key} delivery ${i}: header ${name}`);
        }
      });
    }
  } finally {
    receiver.closeAllConnections?.();
    await new Promise((resolve) => receiver.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runScenario(sc) {
  await withDatabase(async (pool, databaseUrl) => {
    for (const sql of sc.sql_before ?? []) await pool.query(sql);
    const mapping = schemaOf(sc.writer?.schema);
    const adds = sc.writer?.header_hook_adds;
    const writer = new OutboxWriter({
      schema: mapping,
      ...(adds ? { headerHook: (headers) => Object.assign(headers, adds) } : {}),
    });
    const table = `${mapping.namespace ? `"${mapping.namespace}".` : ""}"${mapping.table ?? "outbox"}"`;
    const idCheck = `SELECT count(*)::int AS n FROM ${table} WHERE "${mapping.id ?? "id"}"::text = $1`;
    const committed = [];
    for (const [t, transaction] of (sc.transactions ?? []).entries()) {
      const client = await pool.connect();
      const ids = [];
      const rollback = transaction.end === "rollback";
      try {
        await client.query("BEGIN");
        if (transaction.business_key !== undefined) {
          await client.query("INSERT INTO conformance_writes (key) VALUES ($1)", [transaction.business_key]);
        }
        for (const [w, write] of transaction.writes.entries()) {
          const where = `transaction ${t} write ${w}`;
          if ("error" in write) {
            await assert.rejects(writer.write(client, messageOf(write)), (error) => {
              assert.ok(error instanceof OutboxRefusedError, `${where}: ${error} is not an OutboxRefusedError`);
              assert.ok(error.message.includes(write.error), `${where}: expected an error containing ${JSON.stringify(write.error)}, got ${error.message}`);
              return true;
            }, `${where}: expected an error containing ${JSON.stringify(write.error)}`);
          } else {
            ids.push(await writer.write(client, messageOf(write)));
          }
        }
        await client.query(rollback ? "ROLLBACK" : "COMMIT");
      } finally {
        client.release();
      }
      for (const id of ids) {
        const { rows } = await pool.query(idCheck, [id]);
        assert.equal(rows[0].n, rollback ? 0 : 1, `transaction ${t}: rows of ${table} with the returned id ${id}`);
        if (!rollback) committed.push(id);
      }
    }
    if (sc.binary !== undefined) await runBinary(pool, databaseUrl, sc, committed);
    for (const check of sc.expect?.sql ?? []) {
      assert.equal(await scalar(pool, check.sql), check.equals, check.sql);
    }
  });
}

for (const sc of suite.scenarios) {
  const reason = sc.skip?.[RUNNER];
  if (reason !== undefined) {
    test(`writer: ${sc.id}`, { skip: reason || assert.fail(`${sc.id}: a skip must give its reason`) }, () => {});
    continue;
  }
  test(`writer: ${sc.id}`, { timeout: timeoutMs * 3 }, async () => {
    if (sc.kind === "schema_refusal") {
      for (const c of sc.cases) {
        assert.throws(() => new OutboxWriter({ schema: schemaOf(c.schema) }), (error) => {
          assert.ok(error.message.includes(c.error), `schema ${JSON.stringify(c.schema)}: got ${error.message}, expected ${JSON.stringify(c.error)}`);
          return true;
        }, `schema ${JSON.stringify(c.schema)}: accepted, expected ${JSON.stringify(c.error)}`);
      }
      return;
    }
    await runScenario(sc);
  });
}
