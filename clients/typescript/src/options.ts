import type { InboxDialect, InboxSchema } from "./sql.js";
import type { InboxMessage } from "./worker.js";

/** What a retry policy chooses for a row whose handler failed. */
export type InboxFailureAction =
  | { readonly kind: "retry"; readonly delayMs: number }
  | { readonly kind: "deadLetter" };

/** Back to pending; a claim can take the row again after `ms`, with `attempt` raised by one. */
export function retryAfter(ms: number): InboxFailureAction {
  return Object.freeze({ kind: "retry", delayMs: Math.max(0, Math.round(Number.isFinite(ms) ? ms : 0)) });
}

/** To dead: no claim takes the row again until an operator replays it. */
export function deadLetter(): InboxFailureAction {
  return Object.freeze({ kind: "deadLetter" });
}

/** Decides between a retry and a dead letter; `failure` is what the handler threw or rejected with. */
export type InboxRetryPolicy = (message: InboxMessage, failure: unknown) => InboxFailureAction;

export interface DefaultRetryPolicyOptions {
  /** Retries while `attempt` is below this (default 5: six deliveries, the first being attempt 0). */
  maxAttempts?: number;
  /** The delay after attempt 0 (default 1000 ms); it doubles with each attempt. */
  baseDelayMs?: number;
  /** The ceiling of the delay before jitter (default 300000 ms). */
  maxDelayMs?: number;
  /** The random spread either way, 0 to 1 (default 0.2). */
  jitter?: number;
}

/** The exponential policy with jitter: `baseDelayMs * 2^attempt`, capped, spread by `jitter`. */
export function defaultRetryPolicy(options: DefaultRetryPolicyOptions = {}): InboxRetryPolicy {
  const maxAttempts = options.maxAttempts ?? 5;
  const base = Math.max(0, options.baseDelayMs ?? 1000);
  const ceiling = Math.max(0, options.maxDelayMs ?? 300_000);
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0.2));
  return (message) => {
    if (message.attempt >= maxAttempts) return deadLetter();
    const backoff = Math.min(base * 2 ** Math.min(Math.max(message.attempt, 0), 52), ceiling);
    const factor = 1 + jitter * (2 * Math.random() - 1);
    return retryAfter(Math.min(backoff * factor, ceiling * (1 + jitter)));
  };
}

/** Receives the library's log lines. Every string field has been through `sanitize`. */
export interface InboxLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface InboxOptions {
  /** The `consumption: pull` source whose rows this worker takes. Required. */
  source: string;
  /** The most rows in one claim (default 10, 1 to 1000); rows beyond the free handler slots wait, under their renewed lease. */
  batchSize?: number;
  /** The lease in milliseconds (default 30000, 100 ms to 24 h), renewed every third. */
  leaseMs?: number;
  /** The most handlers running at once (default 1). */
  maxConcurrency?: number;
  /** The wait after a claim that found nothing or failed (default 1000 ms). */
  pollIntervalMs?: number;
  /** How long a stop waits for running handlers before aborting them (default 30000 ms). */
  shutdownGraceMs?: number;
  /** `"postgresql"` (the default); `"sqlserver"` is refused by this build. */
  dialect?: InboxDialect;
  /** Names for a mapped table, namespace or columns; the rest keep `defaultSchema`. */
  schema?: Partial<InboxSchema>;
  /** What a failed row becomes (default `defaultRetryPolicy()`). */
  retryPolicy?: InboxRetryPolicy;
  /** Without a logger the library prints nothing. */
  logger?: InboxLogger;
}

export interface ResolvedInboxOptions {
  readonly source: string;
  readonly batchSize: number;
  readonly leaseMs: number;
  readonly maxConcurrency: number;
  readonly pollIntervalMs: number;
  readonly shutdownGraceMs: number;
  readonly dialect: InboxDialect;
  readonly schema: Partial<InboxSchema>;
  readonly retryPolicy: InboxRetryPolicy;
  readonly logger: InboxLogger | undefined;
}

function integer(name: string, value: number | undefined, fallback: number, min: number, max: number, unit = ""): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new Error(`queuebox: invalid option: ${name} must be a whole number from ${min}${unit} to ${max}${unit}, got ${String(value)}`);
  }
  return v;
}

/** The options with their defaults filled in; throws for a setting that cannot work. */
export function resolveOptions(options: InboxOptions): ResolvedInboxOptions {
  if (typeof options.source !== "string" || options.source.trim() === "") {
    throw new Error("queuebox: invalid option: source is required");
  }
  if (options.source.length > 255) {
    throw new Error("queuebox: invalid option: source is longer than the 255 characters of the source column");
  }
  const leaseMs = options.leaseMs ?? 30_000;
  // Below this a renewal every third of the lease races its own round trip.
  if (!Number.isInteger(leaseMs) || leaseMs < 100) {
    throw new Error(`queuebox: invalid option: leaseMs must be at least 100 ms, got ${String(options.leaseMs)}`);
  }
  const dialect = options.dialect ?? "postgresql";
  if (dialect !== "postgresql") {
    throw new Error(`queuebox: invalid option: dialect ${JSON.stringify(dialect)} is not supported by this build (PostgreSQL only; see the README)`);
  }
  return Object.freeze({
    source: options.source,
    batchSize: integer("batchSize", options.batchSize, 10, 1, 1000),
    leaseMs: integer("leaseMs", leaseMs, 30_000, 100, 86_400_000, " ms"),
    maxConcurrency: integer("maxConcurrency", options.maxConcurrency, 1, 1, 100_000),
    pollIntervalMs: integer("pollIntervalMs", options.pollIntervalMs, 1000, 1, 86_400_000, " ms"),
    shutdownGraceMs: integer("shutdownGraceMs", options.shutdownGraceMs, 30_000, 0, 86_400_000, " ms"),
    dialect,
    schema: { ...(options.schema ?? {}) },
    retryPolicy: options.retryPolicy ?? defaultRetryPolicy(),
    logger: options.logger,
  });
}
