"""The settings and an open outbox in; the bounce reports held for review past `[privacy]
held_retention_days` deleted, out. A held report keeps what a stranger wrote (its sender, the
detail it gave) until the editor decides; without a window a report nobody looks at would stay
for ever.

`prune_held` runs where the windows are applied: as one of the worker's duties
(`HeldRetentionDuty`, every PRUNE_EVERY seconds on a connection of its own), and at the start of
every `newsletter bounces` (the command that holds them), so a project without a worker keeps the
window too. A waiting report counts from when it was held, a decided one from its decision. A
report whose mail is still in the bounce mailbox is held again, as new, the next time the mailbox
is read: the mailbox is the editor's, and only the outbox's copy has a window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from newsletter.errors import OutboxError
from newsletter.outbox import Outbox, open_project_outbox
from newsletter.settings import Settings

DAY = 86_400.0
PRUNE_EVERY = 3600.0  # seconds between two rounds
FAULT_PAUSE = 60.0


def prune_held(outbox: Outbox, settings: Settings, *, now: float | None = None) -> int:
    """Delete the held reports past the window (one statement: they are few); how many."""
    days = settings.privacy.held_retention_days
    return outbox.bounces.delete_held((time.time() if now is None else now) - days * DAY)


class HeldRetentionDuty:
    """The worker's duty (start, run_once -> seconds until the next look, stop): the held
    reports past the window deleted as they age, on a connection opened for each round (a
    round runs off the event loop, on a thread of its own, and the connection is that
    thread's)."""

    name = "held-report retention"

    def __init__(self, settings: Settings, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.deleted = 0

    async def start(self) -> None:
        return None

    async def run_once(self) -> float:
        try:
            deleted = await asyncio.to_thread(self._round)
        except OutboxError as exc:
            self.log(f"held-report retention: the outbox failed: {exc.message}")
            return FAULT_PAUSE
        self.deleted += deleted
        if deleted:
            days = self.settings.privacy.held_retention_days
            self.log(
                f"held-report retention: {deleted} report(s) held for review deleted"
                f" after {days} days"
            )
        return PRUNE_EVERY

    async def stop(self) -> None:
        return None

    def _round(self) -> int:
        with open_project_outbox(self.settings) as outbox:
            return prune_held(outbox, self.settings)
