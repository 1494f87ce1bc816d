"""The settings and an open outbox in; click events older than `[privacy] retention_days`
deleted, a bounded batch at a time, out. One of the worker's steps (`newsletter worker`): it
runs this on each of its rounds, and each batch is its own short transaction, so a send or
`serve` writing beside it waits for one batch at most.

Per-reader data goes with its reader as well: `forget_reader` deletes every event that names
an outbox row of the address (what `newsletter subscribers forget` runs, with the rest of the
person's data).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import NamedTuple

from newsletter.outbox import Outbox
from newsletter.settings import Settings

BATCH = 5000
DAY = 86_400.0


class Pruned(NamedTuple):
    deleted: int
    done: bool  # False: `max_batches` ran out first; the next round goes on


def prune_clicks(
    outbox: Outbox,
    settings: Settings,
    *,
    now: float | None = None,
    batch: int = BATCH,
    max_batches: int = 20,
) -> Pruned:
    """Delete the events older than the retention window, oldest first, `batch` at a time, at
    most `max_batches` batches in this call."""
    cutoff = (time.time() if now is None else now) - settings.privacy.retention_days * DAY
    deleted = 0
    for _ in range(max_batches):
        found = outbox.clicks.delete_older(cutoff, limit=batch)
        deleted += found
        if found < batch:
            return Pruned(deleted, True)
    return Pruned(deleted, False)


def forget_reader(outbox: Outbox, address: str, lists: Iterable[str] | None = None) -> int:
    """Every click event of `address`'s outbox rows (on `lists`, or on all): how many."""
    return outbox.clicks.forget_reader(address, lists)
