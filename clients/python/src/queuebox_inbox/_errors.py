"""The exceptions of the library."""

from __future__ import annotations


class InboxError(Exception):
    """Something the worker cannot do: a missing column, a worker that already runs."""


class InboxConfigError(InboxError, ValueError):
    """A setting or a mapped name that cannot work; the text names it."""
