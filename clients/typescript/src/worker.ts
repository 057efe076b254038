import { resolveOptions, retryAfter } from "./options.js";
import type { InboxFailureAction, InboxOptions, ResolvedInboxOptions } from "./options.js";
import { sanitize, sanitizeError } from "./sanitize.js";
import { bind, inboxSql } from "./sql.js";
import type { InboxStatement, InboxStatements } from "./sql.js";

/** One claimed inbox row as a handler sees it. The claim token stays inside the worker. */
export interface InboxMessage {
  readonly id: string;
  readonly source: string;
  /** With `source`, the identity of the message: deduplicate external work on the pair. */
  readonly idempotencyKey: string;
  readonly aggregateId: string | null;
  readonly eventType: string | null;
  /** The stored JSON body, parsed. */
  readonly payload: unknown;
  /** One string per header name; empty when the row has none. */
  readonly headers: Readonly<Record<string, string>>;
  /** 0 on the first delivery. */
  readonly attempt: number;
  readonly correlationId: string | null;
  readonly createdAt: Date;
}

/** The result of a query through the adapter. */
export interface InboxQueryResult<R = unknown> {
  rows: R[];
  rowCount: number;
}

/** The handler's transaction: run every write through it; the worker commits or rolls it back. */
export interface InboxTransaction {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<InboxQueryResult<R>>;
}

/** One connection taken from the application's pool, as the worker uses it. */
export interface InboxClient {
  /**
   * Runs one statement. `rowMode: "array"` asks for rows as arrays; `name`, when given, lets the
   * adapter keep the statement prepared on the connection (the worker's own statements have one).
   */
  query(text: string, params: readonly unknown[], options?: { rowMode?: "array"; name?: string }): Promise<InboxQueryResult>;
  /** Gives the connection back; `destroy` closes it instead (which also ends its transaction). */
  release(destroy?: boolean): void;
}

/** Where the worker takes its connections: `fromPg(pool)` builds one for a `pg` pool. */
export interface InboxConnection {
  acquire(): Promise<InboxClient>;
}

/**
 * The work for one message. Write through `tx`, never commit or roll back, fail by throwing, and
 * stop when `signal` aborts (lease lost, or a stop past its grace).
 */
export type InboxHandler = (message: InboxMessage, tx: InboxTransaction, signal: AbortSignal) => Promise<void>;

interface Claimed {
  readonly message: InboxMessage;
  readonly token: string;
}

type Outcome = { kind: "ok" } | { kind: "failed"; error: unknown } | { kind: "aborted" };

// The claim's transaction only: a claim lost in a crash only hands its rows back, and every later
// commit that depends on it waits for the WAL up to its own record; a generic plan spares planning
// the claim on every call.
const CLAIM_SETTINGS =
  "SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)";

function named(statement: InboxStatement): { name?: string } {
  return statement.statementName === "" ? {} : { name: statement.statementName };
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

function headersOf(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
      out[name] = typeof v === "string" ? v : JSON.stringify(v);
    }
  }
  return out;
}

function optionalText(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/**
 * The handler slots of a worker, handed out first come, first served (claim order). A stop
 * answers every waiting row at once. (No listener goes on a signal shared by many rows: a signal
 * with more than ten listeners makes Node.js print a warning.)
 */
class Slots {
  #free: number;
  #stopped = false;
  readonly #queue: Array<{ settle: (outcome: "slot" | "stopped") => void; gone: boolean }> = [];

  constructor(size: number) {
    this.#free = size;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Waits for a slot; "stopped" when the worker stops first, "lost" when `lease` aborts first. */
  acquire(lease: AbortSignal): Promise<"slot" | "stopped" | "lost"> {
    if (this.#stopped) return Promise.resolve("stopped");
    if (lease.aborted) return Promise.resolve("lost");
    if (this.#free > 0 && this.#queue.length === 0) {
      this.#free--;
      return Promise.resolve("slot");
    }
    return new Promise((resolve) => {
      const entry = {
        gone: false,
        settle: (outcome: "slot" | "stopped"): void => {
          lease.removeEventListener("abort", onLost);
          resolve(outcome);
        },
      };
      const onLost = (): void => {
        entry.gone = true;
        resolve("lost");
      };
      lease.addEventListener("abort", onLost, { once: true });
      this.#queue.push(entry);
    });
  }

  release(): void {
    for (;;) {
      const next = this.#queue.shift();
      if (next === undefined) {
        this.#free++;
        return;
      }
      if (!next.gone) {
        next.gone = true;
        next.settle("slot");
        return;
      }
    }
  }

  /** Answers every waiting row with "stopped", and every later request too. */
  stop(): void {
    this.#stopped = true;
    for (const entry of this.#queue.splice(0)) {
      if (!entry.gone) {
        entry.gone = true;
        entry.settle("stopped");
      }
    }
  }
}

/** Claims and handles the rows of one pull source. */
export class InboxWorker {
  readonly #connection: InboxConnection;
  readonly #options: ResolvedInboxOptions;
  readonly #sql: InboxStatements;
  #running = false;

  /** Checks the options and renders the statements; throws for a setting that cannot work. */
  constructor(connection: InboxConnection, options: InboxOptions) {
    if (connection === null || typeof connection !== "object" || typeof connection.acquire !== "function") {
      throw new Error("queuebox: InboxWorker needs a connection, for example fromPg(pool)");
    }
    this.#connection = connection;
    this.#options = resolveOptions(options);
    this.#sql = inboxSql(this.#options.dialect, this.#options.schema);
  }

  /**
   * Claims and handles rows until `signal` aborts, then claims nothing more, waits up to
   * `shutdownGraceMs` for running handlers and aborts the rest (nothing is written for them; their
   * rows keep their attempt and return when the lease runs out). Rejects before the first claim
   * when the table lacks a column the library needs (the V10 schema or later).
   */
  async run(handler: InboxHandler, signal?: AbortSignal): Promise<void> {
    if (typeof handler !== "function") throw new Error("queuebox: run needs a handler");
    if (this.#running) throw new Error("queuebox: this worker is already running");
    this.#running = true;
    try {
      await this.#checkSchema();
      await this.#loop(handler, signal);
    } finally {
      this.#running = false;
    }
  }

  async #loop(handler: InboxHandler, signal: AbortSignal | undefined): Promise<void> {
    const o = this.#options;
    // The rows being handled, to abort when the shutdown grace runs out.
    const controls = new Set<AbortController>();
    const slots = new Slots(o.maxConcurrency);
    const running = new Set<Promise<void>>();
    const stopped = new Promise<void>((resolve) => {
      if (signal === undefined) return;
      if (signal.aborted) return resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    const isStopped = (): boolean => signal?.aborted === true;
    while (!isStopped()) {
      // Room for a whole batch: the rows held (waiting or running) are down to maxConcurrency.
      if (running.size > o.maxConcurrency) {
        await Promise.race([...running, stopped]);
        continue;
      }
      let rows: Claimed[] = [];
      try {
        rows = await this.#claim(o.batchSize);
      } catch (error) {
        if (!isStopped()) {
          this.#log("warn", "inbox claim failed; waiting before the next claim", { error });
        }
      }
      for (const row of rows) {
        const task = this.#process(row, handler, slots, controls).catch((error: unknown) => {
          this.#log("error", "inbox row processing failed; the row returns after its lease", { id: row.message.id, error });
        });
        running.add(task);
        void task.finally(() => running.delete(task));
      }
      if (rows.length === 0) await delay(o.pollIntervalMs, signal);
    }
    // Rows still waiting for a slot hand their row back.
    slots.stop();
    const all = Promise.allSettled([...running]);
    const grace = new AbortController();
    const graceOver = await Promise.race([
      all.then(() => false),
      delay(o.shutdownGraceMs, grace.signal).then(() => true),
    ]);
    grace.abort();
    if (graceOver) {
      this.#log("warn", "shutdown grace ran out; aborting running handlers, their rows return after the lease", { handlers: running.size });
      const reason = new Error("queuebox: the shutdown grace ran out");
      for (const control of controls) control.abort(reason);
      await all;
    }
  }

  async #exec(statement: InboxStatement, values: Record<string, unknown>): Promise<InboxQueryResult> {
    const client = await this.#connection.acquire();
    try {
      const result = await client.query(statement.text, bind(statement, values), named(statement));
      client.release();
      return result;
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  async #checkSchema(): Promise<void> {
    try {
      await this.#exec(this.#sql.check, {});
    } catch (error) {
      throw new Error(
        `queuebox: the inbox table lacks what this library needs (the V10 schema or later, which adds the headers column, and the mapped names of options.schema): ${sanitizeError(error)}`,
      );
    }
  }

  // The claim alone in its own transaction, committed before any handler starts.
  async #claim(want: number): Promise<Claimed[]> {
    const o = this.#options;
    const client = await this.#connection.acquire();
    let rows: unknown[];
    try {
      await client.query("BEGIN", []);
      await client.query(CLAIM_SETTINGS, [], { name: "queuebox_claim_settings" });
      const result = await client.query(this.#sql.claim.text, bind(this.#sql.claim, {
        source: o.source,
        batch: want,
        lease_ms: o.leaseMs,
        cand_limit: Math.min(Math.max(3 * o.batchSize, 50), 500),
      }), { ...named(this.#sql.claim), rowMode: "array" });
      await client.query("COMMIT", []);
      client.release();
      rows = result.rows;
    } catch (error) {
      client.release(true);
      throw error;
    }
    // The contract's RETURNING order: id, claim_token, source, idempotency_key, aggregate_id,
    // event_type, payload, headers, attempt, correlation_id, created_at.
    const claimed = rows.map((raw): Claimed => {
      const r = raw as unknown[];
      const message: InboxMessage = Object.freeze({
        id: String(r[0]),
        source: String(r[2]),
        idempotencyKey: String(r[3]),
        aggregateId: optionalText(r[4]),
        eventType: optionalText(r[5]),
        payload: r[6],
        headers: Object.freeze(headersOf(r[7])),
        attempt: Number(r[8]),
        correlationId: optionalText(r[9]),
        createdAt: r[10] instanceof Date ? r[10] : new Date(String(r[10])),
      });
      return { message, token: String(r[1]) };
    });
    // RETURNING comes in no particular order; the oldest rows start first.
    return claimed.sort((a, b) =>
      a.message.createdAt.getTime() - b.message.createdAt.getTime() || (a.message.id < b.message.id ? -1 : 1));
  }

  // Renews every third of the lease; a renewal that changes no row, or fails, aborts the row.
  #keepLease(row: Claimed, control: AbortController): { stop(): Promise<void> } {
    const every = Math.max(1, Math.floor(this.#options.leaseMs / 3));
    let stopped = false;
    let inflight: Promise<void> = Promise.resolve();
    const lost = (reason: string): void => {
      if (control.signal.aborted) return;
      this.#log("warn", "inbox lease lost; aborting the handler, its writes roll back", { id: row.message.id, reason });
      control.abort(new Error(`queuebox: the lease was lost: ${reason}`));
    };
    const tick = (): void => {
      inflight = (async () => {
        try {
          const result = await this.#exec(this.#sql.renew, { id: row.message.id, token: row.token, lease_ms: this.#options.leaseMs });
          if (result.rowCount !== 1) lost("the renewal found no row: another worker owns it");
        } catch (error) {
          lost(`the renewal failed: ${sanitizeError(error)}`);
        }
        if (!stopped && !control.signal.aborted) timer = setTimeout(tick, every);
      })();
    };
    let timer = setTimeout(tick, every);
    return {
      stop: async () => {
        stopped = true;
        clearTimeout(timer);
        await inflight;
      },
    };
  }

  async #process(row: Claimed, handler: InboxHandler, slots: Slots, controls: Set<AbortController>): Promise<void> {
    const control = new AbortController();
    controls.add(control);
    // One renewal schedule from the claim to the end, across the wait and the handler.
    const lease = this.#keepLease(row, control);
    const waited = await slots.acquire(control.signal);
    if (waited !== "slot" || slots.stopped) {
      if (waited === "slot") slots.release();
      await lease.stop();
      controls.delete(control);
      if (waited === "lost") {
        this.#log("warn", "inbox lease lost before the handler started; the row is left to its new owner", { id: row.message.id });
      } else {
        await this.#release(row);
      }
      return;
    }
    try {
      let client: InboxClient;
      try {
        client = await this.#connection.acquire();
      } catch (error) {
        await lease.stop();
        this.#log("warn", "could not open the handler transaction; the row returns after its lease", { id: row.message.id, error });
        return;
      }
      let open = true;
      try {
        await client.query("BEGIN", []);
      } catch (error) {
        await lease.stop();
        client.release(true);
        this.#log("warn", "could not open the handler transaction; the row returns after its lease", { id: row.message.id, error });
        return;
      }
      const tx: InboxTransaction = {
        query: async <R>(text: string, params: readonly unknown[] = []): Promise<InboxQueryResult<R>> => {
          if (!open) throw new Error("queuebox: the handler transaction has ended");
          const result = await client.query(text, params);
          return { rows: result.rows as R[], rowCount: result.rowCount };
        },
      };
      const aborted = new Promise<Outcome>((resolve) => {
        if (control.signal.aborted) return resolve({ kind: "aborted" });
        control.signal.addEventListener("abort", () => resolve({ kind: "aborted" }), { once: true });
      });
      const handled = (async () => handler(row.message, tx, control.signal))().then(
        (): Outcome => ({ kind: "ok" }),
        (error: unknown): Outcome => ({ kind: "failed", error }),
      );
      const outcome = await Promise.race([handled, aborted]);
      await lease.stop();

      if (control.signal.aborted) {
        // Closing the connection ends the transaction and any query the handler still runs.
        open = false;
        client.release(true);
        const reason = control.signal.reason instanceof Error ? control.signal.reason.message : String(control.signal.reason);
        this.#log("warn", "inbox handler aborted; its writes rolled back and nothing written for the row", { id: row.message.id, reason });
        return;
      }
      if (outcome.kind === "failed") {
        open = false;
        await this.#endTransaction(client, "ROLLBACK");
        await this.#fail(row, outcome.error);
        return;
      }
      await this.#complete(row, client);
      open = false;
    } finally {
      slots.release();
      controls.delete(control);
    }
  }

  // Hands a row that never reached a handler back to the claims: pending again, same attempt,
  // fenced on the token. When this fails the row still returns, after its lease.
  async #release(row: Claimed): Promise<void> {
    try {
      await this.#exec(this.#sql.release, { id: row.message.id, token: row.token });
    } catch (error) {
      this.#log("warn", "could not hand an unstarted row back; it returns after its lease", { id: row.message.id, error });
    }
  }

  async #endTransaction(client: InboxClient, verb: "ROLLBACK" | "COMMIT"): Promise<void> {
    try {
      await client.query(verb, []);
      client.release();
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  // The completion in the handler's transaction: one row changed commits the handler's writes with
  // it; none means the claim was lost, and everything rolls back.
  async #complete(row: Claimed, client: InboxClient): Promise<void> {
    let changed: number;
    try {
      const result = await client.query(this.#sql.complete.text, bind(this.#sql.complete, { id: row.message.id, token: row.token }), named(this.#sql.complete));
      changed = result.rowCount;
    } catch (error) {
      client.release(true);
      this.#log("warn", "completion failed; handler writes rolled back, the row returns after its lease", { id: row.message.id, error });
      return;
    }
    if (changed !== 1) {
      await this.#endTransaction(client, "ROLLBACK").catch(() => undefined);
      this.#log("warn", "completion found no row: claim lost, handler writes rolled back", { id: row.message.id });
      return;
    }
    try {
      await this.#endTransaction(client, "COMMIT");
    } catch (error) {
      this.#log("warn", "commit of the handler transaction failed; the row returns after its lease", { id: row.message.id, error });
    }
  }

  // The retry or the dead letter the policy chose, fenced on the token.
  async #fail(row: Claimed, failure: unknown): Promise<void> {
    const text = sanitizeError(failure);
    let action: InboxFailureAction;
    try {
      action = this.#options.retryPolicy(row.message, failure);
    } catch (error) {
      this.#log("error", "the retry policy threw; retrying after one lease", { id: row.message.id, error });
      action = retryAfter(this.#options.leaseMs);
    }
    const dead = action.kind === "deadLetter";
    const fields: Record<string, unknown> = {
      id: row.message.id,
      attempt: row.message.attempt,
      action: dead ? "dead letter" : "retry",
      error: text,
    };
    if (row.message.correlationId !== null) fields["correlation_id"] = row.message.correlationId;
    try {
      const result = await this.#exec(dead ? this.#sql.dead : this.#sql.retry, {
        id: row.message.id,
        token: row.token,
        error: text,
        delay_ms: action.kind === "retry" ? action.delayMs : 0,
      });
      if (result.rowCount === 1) {
        this.#log("warn", "inbox handler failed", fields);
      } else {
        this.#log("warn", "claim lost before the failure could be recorded; the new owner has the row", fields);
      }
    } catch (error) {
      this.#log("error", "recording the handler failure failed; the row returns after its lease", { ...fields, database_error: error });
    }
  }

  #log(level: "info" | "warn" | "error", message: string, fields: Record<string, unknown> = {}): void {
    const logger = this.#options.logger;
    if (logger === undefined) return;
    const clean: Record<string, unknown> = { source: this.#options.source };
    for (const [key, value] of Object.entries(fields)) {
      clean[key] = typeof value === "string" ? sanitize(value) : value instanceof Error || (value !== null && typeof value === "object") ? sanitizeError(value) : value;
    }
    try {
      logger[level](sanitize(message), clean);
    } catch {
      // A logger that throws must not stop the worker.
    }
  }
}
