"""QueueBox pull client: claims inbox rows of a pull source and runs your handler on them.

The worker runs the statements of QueueBox's pull SQL contract with psycopg 3. The claim commits
in its own transaction; the handler writes through the connection it is given, inside a
transaction that the worker commits together with the completion, or rolls back when the handler
raises or the claim was lost. :class:`InboxWorker` runs handlers on threads,
:class:`AsyncInboxWorker` on asyncio tasks.
"""

from __future__ import annotations

import logging

from ._aio import (
    AsyncConnectionSource,
    AsyncConninfoPool,
    AsyncHandler,
    AsyncHandlerContext,
    AsyncInboxWorker,
)
from ._errors import InboxConfigError, InboxError
from ._message import InboxMessage
from ._options import (
    DeadLetter,
    FailureAction,
    InboxOptions,
    RetryAfter,
    RetryPolicy,
    default_retry_policy,
)
from ._outbox import (
    HeaderHook,
    OutboxMessage,
    OutboxRefusedError,
    OutboxSchema,
    OutboxWriter,
    write_outbox,
    write_outbox_async,
)
from ._sanitize import MAX_ERROR_LENGTH, sanitize, sanitize_error
from ._sql import InboxSchema, Statement, Statements, contract_sql, render_statements
from ._worker import ConnectionSource, ConninfoPool, Handler, HandlerContext, InboxWorker

logging.getLogger("queuebox_inbox").addHandler(logging.NullHandler())

__all__ = [
    "MAX_ERROR_LENGTH",
    "AsyncConnectionSource",
    "AsyncConninfoPool",
    "AsyncHandler",
    "AsyncHandlerContext",
    "AsyncInboxWorker",
    "ConnectionSource",
    "ConninfoPool",
    "DeadLetter",
    "FailureAction",
    "Handler",
    "HandlerContext",
    "HeaderHook",
    "InboxConfigError",
    "InboxError",
    "InboxMessage",
    "InboxOptions",
    "InboxSchema",
    "InboxWorker",
    "OutboxMessage",
    "OutboxRefusedError",
    "OutboxSchema",
    "OutboxWriter",
    "RetryAfter",
    "RetryPolicy",
    "Statement",
    "Statements",
    "contract_sql",
    "default_retry_policy",
    "render_statements",
    "sanitize",
    "sanitize_error",
    "write_outbox",
    "write_outbox_async",
]
