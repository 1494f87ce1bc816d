"""The rows a worker's sessions send next: claims in, a queue kept ahead of the sessions out.

The queue is topped up before it runs dry: once it falls under half a batch, the next claim
goes out (leases.send_claim; on PostgreSQL on a connection of its own, its reply watched by the
event loop as the journal's commits are, commit.py), so the sessions go on sending while the
database works on it and wait only for a claim when the queue is empty (the first, and one
after a dry spell). The claim tells, in the same statement, which rows' recipients are
suppressed now (an unsubscribe since the plan): those are handed to `skipped`, not queued. One
claim is on its way at a time. On SQLite a claim is written in the event loop's thread (it
lands before `send_claim` returns): topped up at half a batch, it costs what it did when the
queue ran dry.

A queued row is this worker's (`owner`) and no more: its `sending` mark is written only when a
session is about to upload its body (journal.py). So a worker killed with rows queued leaves
them as they were: once reaped (its lease expired; on SQLite, the next run's `recover`) they are
due again, never `unknown`, never sent twice. A run that ends waits for the claim on its way
(`close`), so the rows it took are this worker's before its lease is retired, which frees them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from newsletter.database import Delivery
from newsletter.database.backend import Landing
from newsletter.database.leases import Claim, Leases
from newsletter.errors import DatabaseError


class Order(NamedTuple):
    """What each claim asks for: the send's rows, for this worker, tried fewer than
    `max_tries` times by this run, none to the domains `resting` names at the time."""

    issue: int
    list_name: str
    worker: str
    max_tries: int
    resting: Callable[[], Sequence[str]]


class Supply:
    def __init__(
        self,
        leases: Leases,
        order: Order,
        *,
        batch: int,
        skipped: Callable[[Delivery], None],
        on_fault: Callable[[DatabaseError], None],
        running: Callable[[], bool],
    ) -> None:
        """Claims of `batch` rows (`order`'s) sent to `leases`; `skipped` is given the
        rows suppressed since the plan, `on_fault` a claim's DatabaseError; `running` False:
        claim no more."""
        self._leases = leases
        self._order = order
        self._batch = batch
        self._skipped = skipped
        self._on_fault = on_fault
        self._running = running
        self._low = max(batch // 2, 1)
        self._queue: deque[Delivery] = deque()
        self._out: Claim | None = None  # the claim on its way
        self._landing: asyncio.Task[bool] | None = None  # what awaits it
        self._dry = False  # the last claim found nothing: none ahead until the queue empties

    def peek(self) -> Delivery | None:
        return self._queue[0] if self._queue else None

    def take(self) -> Delivery | None:
        """The next queued row, the next claim sent if the queue fell under half a batch;
        None if the queue is empty (`refill` then)."""
        if not self._queue:
            return None
        row = self._queue.popleft()
        if len(self._queue) < self._low and not self._dry and self._out is None:
            self._send()
        return row

    async def refill(self) -> bool:
        """With the queue empty: the claim on its way waited for, else one sent and waited
        for; whether it claimed any row (False: none is free and due now)."""
        self._dry = False
        if self._out is None:
            claimed = self._send()
            if self._landing is None:
                return claimed
        assert self._landing is not None
        return await asyncio.shield(self._landing)

    def close(self) -> None:
        """The end of the run: the claim on its way waited for (blocking), its rows this
        worker's before the lease is retired; they stay unsent."""
        if self._landing is not None:
            self._landing.cancel()
        claim, self._out = self._out, None
        if claim is None:
            return
        try:
            claim.landing.wait()
        except DatabaseError as exc:
            self._on_fault(exc)

    def _send(self) -> bool:
        """The next claim sent; True if it has landed already with rows (SQLite)."""
        if not self._running():
            return False
        order = self._order
        try:
            claim = self._leases.send_claim(
                order.issue,
                order.list_name,
                order.worker,
                self._batch,
                max_tries=order.max_tries,
                at=time.time(),
                skip=order.resting(),
            )
        except DatabaseError as exc:  # raised by run(), as a failed commit would have been
            self._on_fault(exc)
            return False
        if claim.landing.fileno is None:
            return self._took(claim)
        self._out = claim
        self._landing = asyncio.ensure_future(self._land(claim))
        return False

    async def _land(self, claim: Claim) -> bool:
        try:
            await landed(claim.landing)
        except DatabaseError as exc:
            self._out = self._landing = None
            self._on_fault(exc)
            return False
        self._out = self._landing = None
        return self._took(claim)

    def _took(self, claim: Claim) -> bool:
        send, suppressed = claim.taken()
        self._queue.extend(send)
        for row in suppressed:
            self._skipped(row)
        self._dry = not (send or suppressed)
        return not self._dry


async def landed(landing: Landing) -> list[list[tuple[Any, ...]]]:
    """The rows of a statement sent without waiting, once its reply has come: the event loop
    watches its socket meanwhile. Raises its DatabaseError."""
    if landing.fileno is None or landing.ready():
        return landing.rows
    loop = asyncio.get_running_loop()
    came: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if came.done():
            return
        try:
            if landing.ready():
                came.set_result(None)
        except DatabaseError as exc:
            came.set_exception(exc)

    loop.add_reader(landing.fileno, readable)
    try:
        await came
    finally:
        loop.remove_reader(landing.fileno)
    return landing.rows
