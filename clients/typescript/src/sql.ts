// The statements of the pull SQL contract (src/contract-sql.ts, generated from
// examples/pull/sql/postgresql), renamed for a mapped schema and numbered for the driver.

import { contractSql } from "./contract-sql.js";

/** The table and column names the worker uses. */
export interface InboxSchema {
  /** The PostgreSQL schema that holds the table; `null` uses the search path. */
  namespace: string | null;
  table: string;
  id: string;
  source: string;
  idempotencyKey: string;
  aggregateId: string;
  eventType: string;
  payload: string;
  headers: string;
  state: string;
  consumption: string;
  attempt: string;
  lastError: string;
  scheduledAt: string;
  createdAt: string;
  processedAt: string;
  claimedAt: string;
  claimToken: string;
  leaseExpiresAt: string;
  correlationId: string;
}

/** The names of QueueBox's own migrations. */
export const defaultSchema: Readonly<InboxSchema> = Object.freeze({
  namespace: null,
  table: "inbox",
  id: "id",
  source: "source",
  idempotencyKey: "idempotency_key",
  aggregateId: "aggregate_id",
  eventType: "event_type",
  payload: "payload",
  headers: "headers",
  state: "state",
  consumption: "consumption",
  attempt: "attempt",
  lastError: "last_error",
  scheduledAt: "scheduled_at",
  createdAt: "created_at",
  processedAt: "processed_at",
  claimedAt: "claimed_at",
  claimToken: "claim_token",
  leaseExpiresAt: "lease_expires_at",
  correlationId: "correlation_id",
});

/** The database dialect. Only `"postgresql"` runs in this build. */
export type InboxDialect = "postgresql" | "sqlserver";

/** One statement: positional SQL (`$1`...) and the parameter names in position order. */
export interface InboxStatement {
  readonly text: string;
  readonly names: readonly string[];
  /** A name derived from the text, for a driver that keeps prepared statements per connection. */
  readonly statementName: string;
}

// FNV-1a of the text: the same statement gets the same name in every worker of the process.
function statementName(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return `queuebox_${hash.toString(16).padStart(8, "0")}_${text.length}`;
}

/** The statements a worker runs. */
export interface InboxStatements {
  readonly claim: InboxStatement;
  readonly renew: InboxStatement;
  readonly complete: InboxStatement;
  readonly retry: InboxStatement;
  readonly dead: InboxStatement;
  readonly release: InboxStatement;
  /** Reads no row but names every column the worker uses: fails on a schema older than V10. */
  readonly check: InboxStatement;
}

const COLUMNS: ReadonlyArray<readonly [keyof InboxSchema, string]> = [
  ["id", "id"], ["source", "source"], ["idempotencyKey", "idempotency_key"],
  ["aggregateId", "aggregate_id"], ["eventType", "event_type"], ["payload", "payload"],
  ["headers", "headers"], ["state", "state"], ["consumption", "consumption"],
  ["attempt", "attempt"], ["lastError", "last_error"], ["scheduledAt", "scheduled_at"],
  ["createdAt", "created_at"], ["processedAt", "processed_at"], ["claimedAt", "claimed_at"],
  ["claimToken", "claim_token"], ["leaseExpiresAt", "lease_expires_at"],
  ["correlationId", "correlation_id"],
];

const CONTRACT_TABLE = "inbox";
const MAX_IDENTIFIER = 63;

function isValidIdentifier(name: string): boolean {
  return name.length <= MAX_IDENTIFIER && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name);
}

function identifierError(field: string, name: string): Error {
  return new Error(
    `queuebox: invalid SQL identifier ${JSON.stringify(name)} for schema.${field}: use letters, digits and underscores, starting with a letter or underscore, at most ${MAX_IDENTIFIER} characters`,
  );
}

type Emit = (kind: "word" | "param", text: string) => string;

// Walks SQL text; emit replaces each bare word and each :name parameter. Quoted text is copied,
// `::` casts kept and `--` comments dropped.
function scanSql(sql: string, emit: Emit): string {
  let out = "";
  const wordStart = /[A-Za-z_]/;
  const wordChar = /[A-Za-z0-9_]/;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i] ?? "";
    const next = sql[i + 1] ?? "";
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < sql.length && sql[j] !== c) j++;
      j = Math.min(j + 1, sql.length);
      out += sql.slice(i, j);
      i = j;
    } else if (c === "-" && next === "-") {
      while (i < sql.length && sql[i] !== "\n") i++;
    } else if (c === ":" && next === ":") {
      out += "::";
      i += 2;
    } else if (c === ":" && /[a-z_]/.test(next)) {
      let j = i + 1;
      while (j < sql.length && wordChar.test(sql[j] ?? "")) j++;
      out += emit("param", sql.slice(i + 1, j));
      i = j;
    } else if (wordStart.test(c) || /[0-9]/.test(c)) {
      let j = i;
      while (j < sql.length && wordChar.test(sql[j] ?? "")) j++;
      const word = sql.slice(i, j);
      out += wordStart.test(c) ? emit("word", word) : word;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

function render(sql: string, names: ReadonlyMap<string, string>): InboxStatement {
  const params: string[] = [];
  const text = scanSql(sql, (kind, word) => {
    if (kind === "param") {
      let position = params.indexOf(word);
      if (position < 0) {
        params.push(word);
        position = params.length - 1;
      }
      return `$${position + 1}`;
    }
    return names.get(word.toLowerCase()) ?? word;
  });
  const trimmed = text.trim();
  return Object.freeze({ text: trimmed, names: Object.freeze(params), statementName: statementName(trimmed) });
}

/**
 * The statements for a dialect and a schema. Every name is checked against the identifier rule
 * and double-quoted; a name that the statements already use for something else is refused.
 */
export function inboxSql(dialect: InboxDialect, schema: Partial<InboxSchema> = {}): InboxStatements {
  if (dialect !== "postgresql") {
    throw new Error(`queuebox: the ${JSON.stringify(dialect)} dialect is not supported by this build (PostgreSQL only; see the README)`);
  }
  const full: InboxSchema = { ...defaultSchema, ...schema };
  if (!isValidIdentifier(full.table)) throw identifierError("table", full.table);
  let table = `"${full.table}"`;
  if (full.namespace !== null && full.namespace !== "") {
    if (!isValidIdentifier(full.namespace)) throw identifierError("namespace", full.namespace);
    table = `"${full.namespace}".${table}`;
  }
  const names = new Map<string, string>([[CONTRACT_TABLE, table]]);
  const used = new Map<string, string>();
  for (const [field, contract] of COLUMNS) {
    const name = full[field];
    if (typeof name !== "string" || !isValidIdentifier(name)) throw identifierError(field, String(name));
    const other = used.get(name.toLowerCase());
    if (other !== undefined) {
      throw new Error(`queuebox: schema.${other} and schema.${field} both name the column ${JSON.stringify(name)}`);
    }
    used.set(name.toLowerCase(), field);
    names.set(contract, `"${name}"`);
  }
  // Every other word of the statements (aliases, CTE names, keywords): a mapped name equal to one
  // of them could capture another reference.
  const words = new Set<string>();
  for (const text of Object.values(contractSql)) {
    scanSql(text, (kind, word) => {
      if (kind === "word" && !names.has(word.toLowerCase())) words.add(word.toLowerCase());
      return word;
    });
  }
  for (const [field, contract] of COLUMNS) {
    const lower = full[field]?.toLowerCase() ?? "";
    if (lower !== contract && words.has(lower)) {
      throw new Error(`queuebox: schema.${field} ${JSON.stringify(full[field])} is a name the SQL statements already use for something else; rename the column or choose another mapping`);
    }
  }
  if (full.table.toLowerCase() !== CONTRACT_TABLE && words.has(full.table.toLowerCase())) {
    throw new Error(`queuebox: schema.table ${JSON.stringify(full.table)} is a name the SQL statements already use for something else`);
  }
  const columns = COLUMNS.map(([field]) => `"${full[field]}"`).join(", ");
  return Object.freeze({
    claim: render(contractSql.claim, names),
    renew: render(contractSql.renew, names),
    complete: render(contractSql.complete, names),
    retry: render(contractSql.retry, names),
    dead: render(contractSql.dead, names),
    release: render(contractSql.release, names),
    check: Object.freeze({ text: `SELECT ${columns} FROM ${table} WHERE false`, names: Object.freeze([]), statementName: "" }),
  });
}

/** The values of a statement in its parameter order. */
export function bind(statement: InboxStatement, values: Readonly<Record<string, unknown>>): unknown[] {
  return statement.names.map((name) => values[name]);
}
