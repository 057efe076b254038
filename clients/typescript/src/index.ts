export { InboxWorker } from "./worker.js";
export type {
  InboxClient,
  InboxConnection,
  InboxHandler,
  InboxMessage,
  InboxQueryResult,
  InboxTransaction,
} from "./worker.js";
export { fromPg } from "./pg.js";
export type { PgClientLike, PgPoolLike } from "./pg.js";
export { deadLetter, defaultRetryPolicy, resolveOptions, retryAfter } from "./options.js";
export type {
  DefaultRetryPolicyOptions,
  InboxFailureAction,
  InboxLogger,
  InboxOptions,
  InboxRetryPolicy,
  ResolvedInboxOptions,
} from "./options.js";
export { defaultSchema, inboxSql } from "./sql.js";
export type { InboxDialect, InboxSchema, InboxStatement, InboxStatements } from "./sql.js";
export { MAX_ERROR_LENGTH, sanitize, sanitizeError } from "./sanitize.js";
export { OutboxRefusedError, OutboxWriter, defaultOutboxSchema, writeOutbox } from "./outbox.js";
export type { OutboxMessage, OutboxQueryable, OutboxSchema, OutboxWriterOptions } from "./outbox.js";
