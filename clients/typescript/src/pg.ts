import type { InboxClient, InboxConnection } from "./worker.js";

/** The part of a `pg` pool client the adapter uses. */
export interface PgClientLike {
  query(config: { text: string; values?: unknown[]; rowMode?: "array"; name?: string }): Promise<{ rows: unknown[]; rowCount: number | null }>;
  release(destroy?: boolean | Error): void;
}

/** The part of a `pg` pool the adapter uses (`new pg.Pool(...)` has it). */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
}

/** The connection adapter for a `pg` pool. The package imports no driver: you pass your pool. */
export function fromPg(pool: PgPoolLike): InboxConnection {
  if (pool === null || typeof pool !== "object" || typeof pool.connect !== "function") {
    throw new Error("queuebox: fromPg needs a pg Pool");
  }
  return {
    async acquire(): Promise<InboxClient> {
      const client = await pool.connect();
      return {
        async query(text, params, options = {}) {
          // A name makes pg prepare the statement once per connection and reuse it.
          const config: { text: string; values: unknown[]; rowMode?: "array"; name?: string } = { text, values: [...params] };
          if (options.rowMode !== undefined) config.rowMode = options.rowMode;
          if (options.name !== undefined) config.name = options.name;
          const result = await client.query(config);
          return { rows: result.rows, rowCount: result.rowCount ?? 0 };
        },
        release(destroy = false) {
          client.release(destroy);
        },
      };
    },
  };
}
