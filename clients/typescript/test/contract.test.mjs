// The package's statements are the contract's files: the committed src/contract-sql.ts must be
// exactly what scripts/contract-sql.mjs makes of examples/pull/sql/postgresql. And both builds
// (ESM and CommonJS, with declarations) export the same API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { generate, generatedFile } from "../scripts/contract-sql.mjs";
import * as esm from "@alternayte/queuebox-inbox";

test("src/contract-sql.ts holds the contract files unchanged", () => {
  assert.equal(readFileSync(generatedFile, "utf8"), generate(),
    "src/contract-sql.ts differs from examples/pull/sql/postgresql: run `npm run sql` and commit the result");
});

test("ESM and CommonJS builds export the same names, with type declarations", () => {
  const cjs = createRequire(import.meta.url)("@alternayte/queuebox-inbox");
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  for (const name of ["InboxWorker", "fromPg", "defaultRetryPolicy", "retryAfter", "deadLetter", "defaultSchema", "inboxSql", "sanitize", "sanitizeError", "MAX_ERROR_LENGTH", "resolveOptions"]) {
    assert.ok(name in esm, `${name} is exported`);
  }
  for (const dir of ["esm", "cjs"]) {
    assert.ok(existsSync(new URL(`../dist/${dir}/index.d.ts`, import.meta.url)), `dist/${dir}/index.d.ts`);
  }
});

test("rendering renames the mapped names and numbers the parameters", () => {
  const sql = esm.inboxSql("postgresql", { namespace: "app", table: "qb_inbox", id: "msg_id", state: "Status" });
  assert.deepEqual(sql.claim.names, ["source", "cand_limit", "batch", "lease_ms"]);
  assert.deepEqual(sql.retry.names, ["delay_ms", "error", "id", "token"]);
  for (const st of [sql.claim, sql.renew, sql.complete, sql.retry, sql.dead, sql.release]) {
    assert.ok(st.text.includes('"app"."qb_inbox"') && st.text.includes('"Status"'), st.text);
    assert.ok(!st.text.includes(":id") && !st.text.includes("--") && !/\binbox\b/.test(st.text.replaceAll('"qb_inbox"', "")), st.text);
  }
  assert.throws(() => esm.inboxSql("postgresql", { payload: "headers" }), /both name the column/);
  assert.throws(() => esm.inboxSql("postgresql", { id: "agg" }), /already use for something else/);
  assert.throws(() => esm.inboxSql("sqlserver"), /not supported/);
});
