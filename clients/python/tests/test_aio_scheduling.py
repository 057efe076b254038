"""The asyncio worker's claim loop and consumers, with the database parts replaced.

The race these tests pin down needs a precise order of event-loop steps, which a database makes
rare (4 of 18 50,000-row runs); replacing the claim, the handling and the schema check
with in-process stand-ins makes it happen on every run. Everything that touches PostgreSQL is
covered by the conformance suite.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from queuebox_inbox import AsyncHandlerContext, AsyncInboxWorker, InboxMessage, InboxOptions
from queuebox_inbox._aio import _Chain, _Run
from queuebox_inbox._core import Claimed


def _claimed(n: int) -> Claimed:
    message = InboxMessage(
        id=uuid.uuid4(),
        source="s",
        idempotency_key=f"k-{n}",
        aggregate_id=None,
        event_type=None,
        payload={},
    )
    return Claimed(message=message, token=uuid.uuid4())


class _Scripted(AsyncInboxWorker):
    """Claims from a script of batches; 'handles' a row by recording it.

    The second claim answers in the very step in which the consumer of the first batch ends: the
    first batch's last row resolves the future that claim waits on, and the consumer then finds
    no row waiting and returns without another suspension.
    """

    def __init__(self, options: InboxOptions, batches: list[list[Claimed]]) -> None:
        super().__init__("postgresql://unused", options)
        self.batches = batches
        self.expected = sum(len(b) for b in batches)
        self.claims = 0
        self.handled: list[uuid.UUID] = []
        self.all_handled = asyncio.Event()
        self.first_batch_done: asyncio.Future[None] | None = None

    async def _check_schema(self) -> None:
        return None

    async def _claim(self, run: _Run, want: int) -> list[Claimed]:
        self.claims += 1
        if self.claims == 1:
            self.first_batch_done = asyncio.get_running_loop().create_future()
        elif self.claims == 2 and self.first_batch_done is not None:
            await self.first_batch_done
        return self.batches.pop(0) if self.batches else []

    async def _serve(self, run: _Run, handler: Any, chain: _Chain) -> None:
        held = chain.held
        assert held is not None
        self.handled.append(held.claimed.message.id)
        if len(self.handled) == self.expected:
            self.all_handled.set()
        # One step away, so the consumer ends in the step that resolves the second claim's wait.
        await asyncio.sleep(0)
        done = self.first_batch_done
        if done is not None and not done.done():
            done.set_result(None)
        chain.held = None
        await self._finish(run, held)


async def _noop(message: InboxMessage, ctx: AsyncHandlerContext) -> None:
    return None


def test_rows_claimed_as_the_last_consumer_ends_are_handled() -> None:
    # One consumer slot, batches of two: the first batch's consumer ends in the step in which the
    # second claim returns. Counting that consumer as alive started none for the second batch, and
    # with two rows held against one slot the loop then waited for progress that never came.
    rows = [_claimed(n) for n in range(5)]
    options = InboxOptions(source="s", batch_size=2, max_concurrency=1, poll_interval=0.01)
    worker = _Scripted(options, [rows[0:1], rows[1:3], rows[3:5]])

    async def main() -> None:
        stop = asyncio.Event()
        run = asyncio.create_task(worker.run(_noop, stop))
        try:
            await asyncio.wait_for(worker.all_handled.wait(), 5)
        finally:
            stop.set()
            await asyncio.wait_for(run, 5)

    asyncio.run(main())
    assert sorted(worker.handled) == sorted(r.message.id for r in rows)
