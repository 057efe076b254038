// The conformance runner: every scenario of clients/conformance/scenarios.json against a fresh
// PostgreSQL database (QB_TEST_PG_URL), through the package's public API (the built ESM output).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { inspect } from "node:util";
import pg from "pg";
import {
  InboxWorker,
  defaultRetryPolicy,
  fromPg,
  sanitize,
  sanitizeError,
} from "@alternayte/queuebox-inbox";

const RUNNER = "typescript";
const repo = new URL("../../../", import.meta.url);
const suite = JSON.parse(readFileSync(new URL("clients/conformance/scenarios.json", repo), "utf8"));
const timeoutMs = suite.defaults.timeout_ms;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
    await sleep(20);
  }
}

function migrations() {
  const dir = new URL("migrations/postgres/", repo);
  const files = readdirSync(dir)
    .filter((f) => /^V\d+__.*\.sql$/.test(f))
    .sort((a, b) => Number(a.slice(1).split("__")[0]) - Number(b.slice(1).split("__")[0]));
  assert.ok(files.length > 0, "no migrations found");
  return files.map((f) => readFileSync(new URL(f, dir), "utf8"));
}

async function withDatabase(fn) {
  const url = process.env.QB_TEST_PG_URL;
  assert.ok(url, "QB_TEST_PG_URL is not set: start PostgreSQL and export it with `eval \"$(bash scripts/services.sh)\"` from the repository root");
  const name = `qb_conf_ts_${randomBytes(8).toString("hex")}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: target.toString(), max: 40 });
  pool.on("error", () => {}); // a connection the worker destroyed on purpose
  try {
    for (const sql of migrations()) await pool.query(sql);
    await pool.query("CREATE TABLE conformance_writes (key TEXT NOT NULL)");
    await fn(pool);
  } finally {
    await pool.end();
    // Closed even when the drop fails: left open, it kept this file's process alive and the test
    // run never ended.
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => admin.end());
  }
}

async function queryText(pool, text, id) {
  const result = await pool.query({ text, values: text.includes("$1") ? [id] : [], rowMode: "array" });
  const value = result.rows[0]?.[0];
  if (value === null || value === undefined) return "<null>";
  return String(value);
}

function toSchema(mapping) {
  const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  const out = {};
  for (const [key, value] of Object.entries(mapping)) out[camel(key)] = value;
  return out;
}

function retryPolicy(r) {
  return defaultRetryPolicy({ maxAttempts: r.max_attempts, baseDelayMs: r.base_delay_ms, maxDelayMs: r.max_delay_ms, jitter: r.jitter });
}

function buildOptions(sc, logger) {
  const w = { ...suite.defaults.worker, ...(sc.worker ?? {}) };
  const options = {
    source: suite.defaults.source,
    batchSize: w.batch_size,
    leaseMs: w.lease_ms,
    maxConcurrency: w.max_concurrency,
    pollIntervalMs: w.poll_interval_ms,
    shutdownGraceMs: w.shutdown_grace_ms,
    logger,
  };
  if (w.retry) options.retryPolicy = retryPolicy(w.retry);
  if (w.schema) options.schema = toSchema(w.schema);
  return options;
}

async function insertRows(pool, sc) {
  const rows = [...(sc.rows ?? [])];
  if (sc.generate) {
    const g = sc.generate;
    for (let i = 1; i <= g.count; i++) {
      rows.push({ key: `${g.key_prefix}${i}`, aggregate: g.aggregates > 0 ? `g-${i % g.aggregates}` : null, age_ms: (g.count - i + 1) * 10 });
    }
  }
  for (const row of rows) {
    await pool.query(
      `INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
         consumption, correlation_id, created_at, scheduled_at)
       VALUES ($1::text, $2::text, $3::text, 'test.event', jsonb_build_object('key', $2::text), '{"x-test": "1"}',
         'pull', 'corr-' || $2::text, now() - $4::bigint * interval '1 millisecond',
         now() - $4::bigint * interval '1 millisecond')`,
      [suite.defaults.source, row.key, row.aggregate ?? null, row.age_ms ?? 1000],
    );
  }
  return rows.map((r) => r.key);
}

class Recorder {
  events = [];
  logs = [];
  byKey = new Map();
  byAgg = new Map();
  add(event) {
    this.events.push(event);
  }
  has(event) {
    return this.events.includes(event);
  }
  enter(m) {
    this.add(`start:${m.idempotencyKey}`);
    const k = (this.byKey.get(m.idempotencyKey) ?? 0) + 1;
    this.byKey.set(m.idempotencyKey, k);
    if (k > 1) this.add(`overlap:key:${m.idempotencyKey}`);
    if (m.aggregateId !== null) {
      const a = (this.byAgg.get(m.aggregateId) ?? 0) + 1;
      this.byAgg.set(m.aggregateId, a);
      if (a > 1) this.add(`overlap:aggregate:${m.aggregateId}`);
    }
  }
  leave(m) {
    this.add(`end:${m.idempotencyKey}`);
    this.byKey.set(m.idempotencyKey, this.byKey.get(m.idempotencyKey) - 1);
    if (m.aggregateId !== null) this.byAgg.set(m.aggregateId, this.byAgg.get(m.aggregateId) - 1);
  }
  logger() {
    const line = (level) => (message, fields = {}) => {
      this.logs.push(`${level} ${message} ${inspect(fields)}`);
    };
    return { info: line("INFO"), warn: line("WARN"), error: line("ERROR") };
  }
}

function describe(m, idMatches) {
  const text = (v) => (v === null ? "-" : v);
  const payloadKey = m.payload && typeof m.payload === "object" ? m.payload.key : "unparsable";
  return `id_matches=${idMatches} source=${m.source} key=${m.idempotencyKey} aggregate=${text(m.aggregateId)} event_type=${text(m.eventType)} payload_key=${payloadKey} header_x_test=${m.headers["x-test"]} attempt=${m.attempt} correlation=${text(m.correlationId)}`;
}

function makeHandler(pool, sc, rec) {
  return async (m, tx, signal) => {
    const key = m.idempotencyKey;
    rec.enter(m);
    try {
      const steps = sc.handlers?.[key] ?? sc.handlers?.["*"] ?? [];
      for (const st of steps) {
        switch (st.do) {
          case "write":
            await tx.query("INSERT INTO conformance_writes (key) VALUES ($1)", [key]);
            break;
          case "sql":
            if (st.record) rec.add(`${st.record}:${key}=${await queryText(pool, st.sql, m.id)}`);
            else await pool.query(st.sql, st.sql.includes("$1") ? [m.id] : []);
            break;
          case "mark":
            rec.add(`${st.event}:${key}`);
            break;
          case "fail":
            throw new Error(st.error.repeat(Math.max(st.repeat ?? 1, 1)));
          case "await_cancel": {
            const cancelled = await new Promise((resolve) => {
              if (signal.aborted) return resolve(true);
              const timer = setTimeout(() => resolve(false), timeoutMs);
              signal.addEventListener("abort", () => { clearTimeout(timer); resolve(true); }, { once: true });
            });
            rec.add(`${cancelled ? "cancelled" : "not_cancelled"}:${key}`);
            throw new Error(cancelled ? "cancelled" : "the handler was never cancelled");
          }
          case "await_sql":
            await pollUntil(timeoutMs, async () => (await queryText(pool, st.sql, m.id)) === "true");
            if (st.record) rec.add(`${st.record}:${key}`);
            break;
          case "watch_sql": {
            let min = null, prev = null, rises = 0;
            const until = Date.now() + st.for_ms;
            while (Date.now() < until) {
              if (signal.aborted) throw new Error("aborted while watching");
              const v = Number(await queryText(pool, st.sql, m.id));
              assert.ok(Number.isFinite(v), "watch_sql needs a number");
              if (min === null || v < min) min = v;
              if (prev !== null && v > prev + 100) rises++;
              prev = v;
              await sleep(20);
            }
            rec.add(`${st.record}.min:${key}=${min}`);
            rec.add(`${st.record}.rises:${key}=${rises}`);
            break;
          }
          case "record_message": {
            const owner = await queryText(pool, "SELECT idempotency_key FROM inbox WHERE id = $1::uuid", m.id);
            rec.add(`message:${key}=${describe(m, owner === key)}`);
            break;
          }
          case "check_token_hidden": {
            const token = await queryText(pool, "SELECT claim_token::text FROM inbox WHERE id = $1::uuid", m.id);
            const shown = inspect(m, { depth: 10, showHidden: true }) + JSON.stringify(m);
            const named = Object.getOwnPropertyNames(m).some((k) => k.toLowerCase().includes("token"));
            rec.add(`${token === "<null>" || shown.includes(token) || named ? "token_visible" : "token_hidden"}:${key}`);
            break;
          }
          default:
            throw new Error(`unknown handler step ${st.do}`);
        }
      }
    } finally {
      rec.leave(m);
    }
  };
}

async function runWorkerScenario(sc) {
  await withDatabase(async (pool) => {
    for (const sql of sc.sql_before ?? []) await pool.query(sql);
    const keys = await insertRows(pool, sc);
    for (const sql of sc.sql_after_rows ?? []) await pool.query(sql);
    const rec = new Recorder();
    let workers = [];
    const stopAll = () => workers.forEach((w) => w.control.abort());
    const waitAll = async () => {
      for (const w of workers) {
        let timer;
        const timedOut = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`run did not return within ${timeoutMs} ms of the stop`)), timeoutMs); });
        try {
          await Promise.race([w.done, timedOut]);
        } finally {
          clearTimeout(timer);
        }
      }
      workers = [];
    };
    try {
      for (const st of sc.run) {
        switch (st.do) {
          case "start":
            for (let i = 0; i < Math.max(sc.workers ?? 1, 1); i++) {
              if (st.expect_error_contains) {
                let error;
                try {
                  const worker = new InboxWorker(fromPg(pool), buildOptions(sc, rec.logger()));
                  const control = new AbortController();
                  const timer = setTimeout(() => control.abort(), timeoutMs);
                  try {
                    await worker.run(makeHandler(pool, sc, rec), control.signal);
                  } finally {
                    clearTimeout(timer);
                  }
                } catch (e) {
                  error = e;
                }
                assert.ok(error, `want an error containing "${st.expect_error_contains}" from the constructor or run, got none`);
                assert.match(error.message.toLowerCase(), new RegExp(st.expect_error_contains.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
                continue;
              }
              const worker = new InboxWorker(fromPg(pool), buildOptions(sc, rec.logger()));
              const control = new AbortController();
              const done = worker.run(makeHandler(pool, sc, rec), control.signal);
              done.catch(() => {});
              workers.push({ control, done });
            }
            break;
          case "wait_sql":
            await pollUntil(timeoutMs, async () => (await queryText(pool, st.sql, "")) === "true").catch((e) => {
              throw new Error(`waiting for ${st.sql}: ${e.message}\nevents: ${rec.events.join(" | ")}\nlogs: ${rec.logs.join("\n")}`);
            });
            break;
          case "wait_event":
            await pollUntil(timeoutMs, async () => rec.has(st.event)).catch((e) => {
              throw new Error(`waiting for the event ${st.event}: ${e.message}\nevents: ${rec.events.join(" | ")}`);
            });
            break;
          case "sql":
            await pool.query(st.sql);
            break;
          case "stop":
            stopAll();
            await waitAll();
            break;
          case "stop_async":
            stopAll();
            break;
          case "wait_stopped":
            await waitAll();
            break;
          default:
            throw new Error(`unknown run step ${st.do}`);
        }
      }
      stopAll();
      await waitAll();
    } finally {
      stopAll();
      await Promise.allSettled(workers.map((w) => w.done));
    }
    await check(pool, sc, rec, keys);
  });
}

async function check(pool, sc, rec, keys) {
  const e = sc.expect ?? {};
  const events = [...rec.events];
  const count = (ev) => events.filter((x) => x === ev).length;
  let checked = 0;
  for (const ev of e.events ?? []) {
    checked++;
    assert.ok(count(ev) > 0, `missing event ${ev}\nevents: ${events.join(" | ")}`);
  }
  for (const ev of e.events_absent ?? []) {
    checked++;
    assert.equal(count(ev), 0, `unexpected event ${ev}`);
  }
  for (const prefix of e.events_absent_prefix ?? []) {
    checked++;
    assert.deepEqual(events.filter((x) => x.startsWith(prefix)), [], `unexpected events starting with ${prefix}`);
  }
  for (const [ev, want] of Object.entries(e.event_counts ?? {})) {
    checked++;
    assert.equal(count(ev), want, `event ${ev} count`);
  }
  if (e.each_key_started !== undefined) {
    checked++;
    for (const k of keys) assert.equal(count(`start:${k}`), e.each_key_started, `row ${k} handled`);
  }
  if (e.order) {
    checked++;
    const positions = e.order.map((ev) => events.indexOf(ev));
    positions.forEach((p, i) => {
      assert.ok(p >= 0 && (i === 0 || p > positions[i - 1]), `event ${e.order[i]} missing or out of order\nevents: ${events.join(" | ")}`);
    });
  }
  for (const n of e.numbers ?? []) {
    checked++;
    const found = events.find((x) => x.startsWith(`${n.event}=`));
    assert.ok(found, `no number recorded for ${n.event}\nevents: ${events.join(" | ")}`);
    const value = Number(found.slice(n.event.length + 1));
    assert.ok(value >= n.at_least, `${n.event} = ${value}, want at least ${n.at_least}`);
  }
  for (const c of e.sql ?? []) {
    checked++;
    const got = await queryText(pool, c.sql, "");
    if (c.equals !== undefined) assert.equal(got, c.equals, c.sql);
    for (const want of c.contains ?? []) assert.ok(got.includes(want), `${c.sql}\ngot ${got}, which lacks ${want}`);
    for (const not of c.not_contains ?? []) assert.ok(!got.includes(not), `${c.sql}\ngot ${got}, which holds ${not}`);
  }
  if (e.logs) {
    checked++;
    if (e.logs.not_empty) assert.ok(rec.logs.length > 0, "the logger received nothing");
    for (const line of rec.logs) {
      for (const not of e.logs.not_contains ?? []) assert.ok(!line.includes(not), `a log line holds ${not}: ${line}`);
    }
  }
  const refusal = sc.run.some((st) => st.expect_error_contains);
  assert.ok(checked > 0 || refusal, "the scenario checks nothing");
}

function runPolicyScenario(sc) {
  for (const p of sc.policies) {
    const policy = p.policy === "default" ? defaultRetryPolicy() : retryPolicy(p.policy);
    for (const c of p.cases) {
      const seen = new Set();
      for (let i = 0; i < sc.samples; i++) {
        const action = policy({ attempt: c.attempt }, new Error("boom"));
        if (c.dead) {
          assert.equal(action.kind, "deadLetter", `policy ${JSON.stringify(p.policy)} attempt ${c.attempt}`);
          continue;
        }
        assert.equal(action.kind, "retry", `policy ${JSON.stringify(p.policy)} attempt ${c.attempt}`);
        assert.ok(action.delayMs >= c.min_ms - 1 && action.delayMs <= c.max_ms + 1,
          `policy ${JSON.stringify(p.policy)} attempt ${c.attempt}: ${action.delayMs} ms outside [${c.min_ms}, ${c.max_ms}]`);
        seen.add(action.delayMs);
      }
      if (!c.dead && c.max_ms > c.min_ms) assert.ok(seen.size >= 2, "the jitter does not spread");
    }
  }
}

function runSanitizeScenario(sc) {
  assert.ok(sc.cases.length > 0);
  for (const c of sc.cases) assert.equal(sanitize(c.input), c.output, `sanitize(${JSON.stringify(c.input)})`);
  for (const c of sc.cuts) {
    const got = sanitize(c.repeat.repeat(c.times));
    assert.equal(got, c.output_repeat.repeat(c.output_times));
    assert.ok(Buffer.byteLength(got) <= c.max_bytes);
  }
  assert.equal(sanitizeError(new Error(sc.cases[0].input)), sc.cases[0].output);
}

for (const sc of suite.scenarios) {
  const reason = sc.skip?.[RUNNER];
  test(sc.id, { skip: reason === undefined ? false : `skipped by the scenario data: ${reason}`, timeout: 120_000 }, async () => {
    switch (sc.kind) {
      case "retry_policy":
        return runPolicyScenario(sc);
      case "sanitize":
        return runSanitizeScenario(sc);
      case undefined:
        return runWorkerScenario(sc);
      default:
        throw new Error(`unknown scenario kind ${sc.kind}`);
    }
  });
}
