// The outbox writer: one insert of an outbox row inside the caller's own transaction. QueueBox
// delivers the row once that transaction commits; if it rolls back, there is no row and no message.

/** What the writer runs its insert on: a `pg` client inside your transaction, or the `tx` of an inbox handler. */
export interface OutboxQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** One outbox row to write. `topic` and `payload` are required; an absent field takes the column default. */
export interface OutboxMessage {
  /** What routes match, such as `order.created`. */
  topic: string;
  /**
   * Any JSON value (`null` included), encoded with `JSON.stringify`. A `Uint8Array` (a `Buffer`
   * too) is JSON text that is already encoded: it is checked and stored as it is.
   */
  payload: unknown;
  /** Orders the rows of one key (delivered in write order); `""` or `null` is no key. */
  key?: string | null;
  /** The kind of entity, for broker addresses; `""` or `null` is none. */
  aggregateType?: string | null;
  /** Sent as HTTP or message headers; values are strings. */
  headers?: Record<string, string>;
  /** Deliveries before the row goes dead: a whole number from 1 to 2147483647 (default 5). */
  maxAttempts?: number;
  /** The earliest delivery (default now). */
  scheduledAt?: Date;
  /**
   * The caller's W3C trace context (`00-<trace id>-<span id>-<flags>`), stored as the row's
   * `traceparent` header so the delivery continues the caller's trace; a malformed one is refused.
   * With OpenTelemetry: `propagation.inject(context.active(), carrier)` and pass
   * `carrier.traceparent`.
   */
  traceparent?: string | null;
  /** The W3C `tracestate` going with `traceparent`, stored as the `tracestate` header. */
  tracestate?: string | null;
}

/** Table and column names; the defaults are those of QueueBox's migrations. */
export interface OutboxSchema {
  /** The PostgreSQL schema that holds the table; absent or `""` uses the search path. */
  namespace?: string;
  table: string;
  id: string;
  topic: string;
  key: string;
  aggregateType: string;
  payload: string;
  headers: string;
  maxAttempts: string;
  scheduledAt: string;
}

export const defaultOutboxSchema: Readonly<OutboxSchema> = Object.freeze({
  table: "outbox",
  id: "id",
  topic: "topic",
  key: "key",
  aggregateType: "aggregate_type",
  payload: "payload",
  headers: "headers",
  maxAttempts: "max_attempts",
  scheduledAt: "scheduled_at",
});

export interface OutboxWriterOptions {
  /** The names your mapping renames (the service's `database.columnMapping.outbox`); the rest keep their defaults. */
  schema?: Partial<OutboxSchema>;
  /**
   * Gets a copy of each message's headers before the checks and may add or change some (a trace
   * context, for example); what it leaves is stored. Without it headers pass through as given.
   */
  headerHook?: (headers: Record<string, string>) => void;
}

/** A value the outbox table cannot hold, thrown before any SQL runs (the transaction stays usable). */
export class OutboxRefusedError extends Error {
  /** The same text in every QueueBox client. */
  readonly reason: string;
  constructor(reason: string) {
    super(`queuebox: ${reason}`);
    this.name = "OutboxRefusedError";
    this.reason = reason;
  }
}

const MAX_TEXT = 255;
const MAX_ATTEMPTS = 2147483647;
const MAX_IDENTIFIER = 63;

// [field as messages name it, OutboxSchema property], in the order every client checks them.
const COLUMNS: ReadonlyArray<readonly [string, Exclude<keyof OutboxSchema, "namespace" | "table">]> = [
  ["id", "id"], ["topic", "topic"], ["key", "key"], ["aggregate_type", "aggregateType"],
  ["payload", "payload"], ["headers", "headers"], ["max_attempts", "maxAttempts"],
  ["scheduled_at", "scheduledAt"],
];

function identifier(what: string, name: unknown): string {
  if (typeof name === "string" && name.length <= MAX_IDENTIFIER && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    return `"${name}"`;
  }
  throw new Error(
    `queuebox: invalid SQL identifier ${JSON.stringify(String(name))} for the outbox ${what}: use letters, digits and underscores, starting with a letter or underscore, at most ${MAX_IDENTIFIER} characters`,
  );
}

/** Code points, as PostgreSQL counts a VARCHAR (String.length counts UTF-16 units). */
function characters(text: string): number {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

function checkText(field: string, value: string): void {
  if (value.includes("\u0000")) {
    throw new OutboxRefusedError(`the ${field} holds the character U+0000, which the outbox cannot store`);
  }
  if (value.length > MAX_TEXT) {
    const n = characters(value);
    if (n > MAX_TEXT) throw new OutboxRefusedError(`the ${field} is ${n} characters long; the outbox stores at most ${MAX_TEXT}`);
  }
}

function optionalText(field: string, value: unknown): string | null {
  if (value === undefined || value === null || value === "") return null;
  if (typeof value !== "string") throw new OutboxRefusedError(`the ${field} is not a string`);
  checkText(field, value);
  return value;
}

function quotedName(name: string): string {
  let out = "'";
  for (const c of name) {
    const code = c.codePointAt(0) ?? 0;
    if (c === "'") out += "\\'";
    else if (c === "\\") out += "\\\\";
    else if (code <= 0x1f || (code >= 0x7f && code <= 0x9f)) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += c;
  }
  return `${out}'`;
}

/** The JSONPath of the first string or member name holding U+0000, walked as every client walks it. */
function nulPath(document: unknown): string | null {
  const stack: Array<[unknown, string]> = [[document, "$"]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [value, path] = top;
    if (typeof value === "string") {
      if (value.includes("\u0000")) return path;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i -= 1) stack.push([value[i], `${path}[${i}]`]);
    } else if (value !== null && typeof value === "object") {
      const members = value as Record<string, unknown>;
      const names = Object.keys(members).sort();
      for (let i = names.length - 1; i >= 0; i -= 1) {
        const name = names[i] as string;
        const memberPath = `${path}[${quotedName(name)}]`;
        if (name.includes("\u0000")) return memberPath;
        stack.push([members[name], memberPath]);
      }
    }
  }
  return null;
}

function payloadText(payload: unknown): string {
  let text: string;
  if (payload instanceof Uint8Array) {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
    } catch {
      throw new OutboxRefusedError("the payload is not valid JSON: it is not UTF-8");
    }
    try {
      JSON.parse(text);
    } catch (error) {
      throw new OutboxRefusedError(`the payload is not valid JSON: ${(error as Error).message}`);
    }
  } else {
    let encoded: string | undefined;
    try {
      encoded = JSON.stringify(payload);
    } catch (error) {
      throw new OutboxRefusedError(`the payload cannot be encoded as JSON: ${(error as Error).message}`);
    }
    if (encoded === undefined) throw new OutboxRefusedError(`the payload cannot be encoded as JSON: it is ${typeof payload}`);
    text = encoded;
  }
  // JSON can write U+0000 only as the escape \u0000: without it in the text there is none.
  if (text.includes("\\u0000")) {
    const path = nulPath(JSON.parse(text));
    if (path !== null) {
      throw new OutboxRefusedError(`the payload holds the character U+0000 (\\u0000) at ${path}, which the outbox cannot store`);
    }
  }
  return text;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[\s\S]*)?$/;
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const TRACESTATE_MEMBERS = 32;
const BAD_TRACEPARENT =
  "the traceparent is not a W3C trace context: version-traceid-parentid-flags in lowercase hexadecimal, version not ff, ids not all zeros";
const BAD_TRACESTATE = "the tracestate is not a W3C tracestate: at most 32 comma-separated key=value members with distinct keys";
const LONE_TRACESTATE = "a tracestate needs a traceparent";

/** Puts the message's trace context in `headers`, in place of any header of those names. */
function traceContext(headers: Record<string, string>, traceparent: unknown, tracestate: unknown): void {
  if (traceparent === undefined || traceparent === null || traceparent === "") {
    if (tracestate !== undefined && tracestate !== null && tracestate !== "") throw new OutboxRefusedError(LONE_TRACESTATE);
    return;
  }
  if (typeof traceparent !== "string") throw new OutboxRefusedError(BAD_TRACEPARENT);
  if (tracestate !== undefined && tracestate !== null && typeof tracestate !== "string") throw new OutboxRefusedError(BAD_TRACESTATE);
  for (const name of Object.keys(headers)) {
    const lower = name.toLowerCase();
    if (lower === "traceparent" || lower === "tracestate") delete headers[name];
  }
  headers.traceparent = traceparent;
  if (typeof tracestate === "string" && tracestate !== "") headers.tracestate = tracestate;
}

function validTraceparent(value: string): boolean {
  const m = TRACEPARENT.exec(value);
  if (m === null) return false;
  const [, version, traceId, parentId, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return false;
  return /[^0]/.test(traceId ?? "") && /[^0]/.test(parentId ?? "");
}

function validTracestate(value: string): boolean {
  const members = value.split(",").map((m) => m.replace(/^[ \t]+|[ \t]+$/g, "")).filter((m) => m !== "");
  if (members.length > TRACESTATE_MEMBERS) return false;
  const keys = new Set<string>();
  for (const member of members) {
    if (!TRACESTATE_MEMBER.test(member)) return false;
    const key = member.slice(0, member.indexOf("="));
    if (keys.has(key)) return false;
    keys.add(key);
  }
  return true;
}

/**
 * The row's `traceparent` and `tracestate` headers (any letter case), from the message, the
 * caller's headers or the hook, must be what QueueBox reads as a trace context.
 */
function checkTraceHeaders(headers: Record<string, string>): void {
  const entries = Object.entries(headers);
  const parents = entries.filter(([n]) => n.toLowerCase() === "traceparent").map(([, v]) => v);
  const states = entries.filter(([n]) => n.toLowerCase() === "tracestate").map(([, v]) => v);
  if (parents.length > 1 || parents.some((v) => !validTraceparent(v))) throw new OutboxRefusedError(BAD_TRACEPARENT);
  if (states.length > 1 || states.some((v) => !validTracestate(v))) throw new OutboxRefusedError(BAD_TRACESTATE);
  if (states.length > 0 && parents.length === 0) throw new OutboxRefusedError(LONE_TRACESTATE);
}

function headersOf(message: OutboxMessage, hook: OutboxWriterOptions["headerHook"]): Record<string, string> {
  const headers: unknown = message.headers;
  if (headers !== undefined && (headers === null || typeof headers !== "object" || Array.isArray(headers))) {
    throw new OutboxRefusedError("the headers are not an object of string values");
  }
  const copy: Record<string, string> = { ...(headers as Record<string, string> | undefined) };
  traceContext(copy, message.traceparent, message.tracestate);
  hook?.(copy);
  for (const [name, value] of Object.entries(copy)) {
    if (typeof value !== "string") throw new OutboxRefusedError(`the header ${JSON.stringify(name)} has a value that is not a string`);
  }
  checkTraceHeaders(copy);
  return copy;
}

/** Writes outbox rows under one schema. Build it once; `write` is safe to call concurrently on different clients. */
export class OutboxWriter {
  readonly #table: string;
  readonly #columns: Readonly<Record<(typeof COLUMNS)[number][1], string>>;
  readonly #hook: OutboxWriterOptions["headerHook"];

  /** Checks every name of the schema (runs no SQL); throws on a bad one. */
  constructor(options: OutboxWriterOptions = {}) {
    const schema: OutboxSchema = { ...defaultOutboxSchema, ...options.schema };
    let table = identifier("table", schema.table);
    if (schema.namespace !== undefined && schema.namespace !== "") table = `${identifier("namespace", schema.namespace)}.${table}`;
    const columns = {} as Record<(typeof COLUMNS)[number][1], string>;
    COLUMNS.forEach(([field, property], index) => {
      const name = schema[property];
      columns[property] = identifier(`column ${field}`, name);
      const earlier = COLUMNS.slice(0, index).find(([, other]) => schema[other] === name);
      if (earlier !== undefined) {
        throw new Error(`queuebox: the outbox columns ${earlier[0]} and ${field} are both named ${JSON.stringify(name)}`);
      }
    });
    this.#table = table;
    this.#columns = columns;
    this.#hook = options.headerHook;
  }

  /**
   * Checks the message and inserts it through `client` (a `pg` client inside your transaction, or
   * an inbox handler's `tx`); resolves to the new row's id. Throws `OutboxRefusedError` before any
   * SQL for a value the table cannot hold.
   */
  async write(client: OutboxQueryable, message: OutboxMessage): Promise<string> {
    const headers = headersOf(message, this.#hook);
    if (typeof message.topic !== "string") throw new OutboxRefusedError("the topic is not a string");
    checkText("topic", message.topic);
    if (message.topic === "") throw new OutboxRefusedError("the topic is empty; every outbox row needs one");
    const key = optionalText("key", message.key);
    const aggregateType = optionalText("aggregate type", message.aggregateType);
    const payload = payloadText(message.payload);
    for (const [name, value] of Object.entries(headers)) {
      if (name.includes("\u0000") || value.includes("\u0000")) {
        throw new OutboxRefusedError("a header holds the character U+0000, which the outbox cannot store");
      }
    }
    const maxAttempts = message.maxAttempts;
    if (maxAttempts !== undefined && !(Number.isInteger(maxAttempts) && maxAttempts >= 1 && maxAttempts <= MAX_ATTEMPTS)) {
      const shown = typeof maxAttempts === "number" ? String(maxAttempts) : JSON.stringify(maxAttempts);
      throw new OutboxRefusedError(`max attempts is ${shown}; it must be a whole number from 1 to ${MAX_ATTEMPTS}`);
    }
    const scheduledAt = message.scheduledAt;
    if (scheduledAt !== undefined && !(scheduledAt instanceof Date && !Number.isNaN(scheduledAt.getTime()))) {
      throw new OutboxRefusedError("the scheduled time is not a valid Date");
    }

    const c = this.#columns;
    const columns = [c.topic, c.payload];
    const values = ["$1", "$2::jsonb"];
    const params: unknown[] = [message.topic, payload];
    const add = (column: string, cast: string, value: unknown): void => {
      columns.push(column);
      params.push(value);
      values.push(`$${params.length}${cast}`);
    };
    if (key !== null) add(c.key, "", key);
    if (aggregateType !== null) add(c.aggregateType, "", aggregateType);
    if (Object.keys(headers).length > 0) add(c.headers, "::jsonb", JSON.stringify(headers));
    if (maxAttempts !== undefined) add(c.maxAttempts, "::integer", maxAttempts);
    if (scheduledAt !== undefined) add(c.scheduledAt, "::timestamptz", scheduledAt.toISOString());
    const sql = `INSERT INTO ${this.#table} (${columns.join(", ")}) VALUES (${values.join(", ")}) RETURNING ${c.id}::text AS id`;
    const result = await client.query(sql, params);
    const row = result.rows[0] as { id?: unknown } | undefined;
    if (typeof row?.id !== "string") throw new Error("queuebox: the outbox insert returned no id");
    return row.id;
  }
}

const defaultWriter = new OutboxWriter();

/** Writes `message` into the `outbox` table of QueueBox's migrations; see `OutboxWriter.write`. */
export function writeOutbox(client: OutboxQueryable, message: OutboxMessage): Promise<string> {
  return defaultWriter.write(client, message);
}
