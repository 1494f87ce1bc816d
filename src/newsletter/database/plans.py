"""A send's plan: the list in, a batch at a time; the rows of the delivery log and the plan's counts
out. Planning streams the list (`start`, `add` a batch at a time, `finish`): each batch is one
upsert, the row is the snapshot (address as written, name, Message-ID), the UNIQUE key dedupes,
and the last steps skip, in the database, waiting rows whose address is suppressed or was not
on the list this time. Nothing the size of the list is held in memory.

With several workers on one PostgreSQL outbox a send is planned once: under its planning lock,
a worker that finds a plan whose planner still runs shares it (`is_current`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple

from newsletter.database.backend import Backend
from newsletter.database.records import (
    BOUNCED,
    COMPLAINED,
    DEPARTED,
    FREE,
    UNSUBSCRIBED,
    PlanResult,
    now,
)
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus

S = DeliveryStatus
# How often a worker waiting for another's planning looks again (and keeps its lease meanwhile).
LOCK_POLL = 0.2


class Planned(NamedTuple):
    """One subscriber as planning stores it: the key, the address as sent, name, Message-ID."""

    recipient: str
    envelope: str
    name: str
    message_id: str | None


# A Planned, or the plain tuple the list's reader sends (cheaper to pickle).
PlannedRow = tuple[str, str, str, str | None]


@dataclass(frozen=True)
class PlanStart:
    generation: int
    before: int
    planner: str


def plan_key(issue: int, list_name: str) -> int:
    """The lock of one send's planning: 64 bits of a hash of (issue, list)."""
    digest = hashlib.sha256(f"newsletter plan {issue} {list_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Plans:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @contextmanager
    def lock(
        self, issue: int, list_name: str, *, waiting: Callable[[], None] | None = None
    ) -> Iterator[None]:
        """Held while one worker plans (issue, list); another waits for it, calling `waiting`
        every LOCK_POLL seconds (so it can keep its lease). A lock of the connection: the plan
        commits batch by batch under it, and a planner that dies drops its connection and with
        it the lock. On SQLite the send lock has excluded every other planner already."""
        key = plan_key(issue, list_name)
        while not self.backend.try_lock(key):
            if waiting is not None:
                waiting()
            time.sleep(LOCK_POLL)
        try:
            yield
        except BaseException:
            with suppress(DatabaseError):  # a lost session took its lock with it
                self.backend.unlock(key)
            raise
        self.backend.unlock(key)

    def is_current(self, issue: int, list_name: str) -> bool:
        """True if a worker still running finished planning this send (the others share its
        plan). A plan whose planner died halfway (its lease may run for a while yet) names no
        planner: the next worker plans again."""
        found = self.backend.fetch(
            "SELECT 1 FROM plans p JOIN workers w ON w.id = p.planned_by"
            " WHERE p.issue = ? AND p.list = ? AND w.state = 'active'"
            f" AND w.lease_until >= {self.backend.clock}",
            (issue, list_name),
        )
        return bool(found)

    def unshare(self, issue: int, list_name: str) -> None:
        """The send's plan names no planner: every worker plans it afresh (a new test)."""
        self.backend.run(
            "UPDATE plans SET planned_by = '' WHERE issue = ? AND list = ?", (issue, list_name)
        )

    def start(self, issue: int, list_name: str, worker: str) -> PlanStart:
        """A new plan generation; this run's attempt counts start again at zero. The plan
        names its planner only once `finish` has run."""
        db = self.backend
        with db.transaction():
            db.run(
                "INSERT INTO plans (issue, list, generation, planned_at, planned_by)"
                " VALUES (?, ?, 1, ?, '') ON CONFLICT (issue, list) DO UPDATE SET"
                " generation = plans.generation + 1, planned_at = excluded.planned_at,"
                " planned_by = ''",
                (issue, list_name, now()),
            )
            (generation,) = db.fetch(
                "SELECT generation FROM plans WHERE issue = ? AND list = ?", (issue, list_name)
            )[0]
            db.run(
                f"UPDATE deliveries SET tries = 0 WHERE issue = ? AND list = ? AND {FREE}"
                " AND tries > 0",
                (issue, list_name),
            )
            return PlanStart(int(generation), self._count(issue, list_name), worker)

    def add(self, issue: int, list_name: str, generation: int, batch: Sequence[PlannedRow]) -> None:
        """One batch of the list, in one transaction. A recipient already planned keeps its
        row (and its snapshot); a waiting one is marked as still on the list. Rows go in in key
        order: the UNIQUE key's and the reader index's inserts then touch neighbouring pages."""
        stamp = now()
        with self.backend.transaction():
            self.backend.many(
                "INSERT INTO deliveries (issue, list, recipient, envelope, name, message_id,"
                " seen, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (issue, list, recipient) DO UPDATE SET seen = excluded.seen,"
                " message_id = coalesce(deliveries.message_id, excluded.message_id)"
                " WHERE deliveries.state IN ('pending', 'deferred')",
                [
                    (issue, list_name, key, envelope, name, mid, generation, stamp, stamp)
                    for key, envelope, name, mid in sorted(batch)
                ],
            )

    def finish(self, issue: int, list_name: str, start: PlanStart) -> PlanResult:
        """Waiting rows whose address is suppressed, or was not on the list this time, become
        `skipped` with the reason; the counts of the plan."""
        db = self.backend
        stamp = now()
        skipped = 0
        with db.transaction():
            # Each step reads every waiting row: skipped when it cannot find any (no
            # suppressions; or a first plan, where every row was on the list just now).
            if db.fetch("SELECT 1 FROM suppressions WHERE list = ? LIMIT 1", (list_name,)):
                # The reason is the suppression's: `bounced` and `complained` say so, every
                # other source (one-click, web, cli) is the reader's or the editor's
                # `unsubscribed`.
                skipped += db.run(
                    "UPDATE deliveries SET state = ?, updated_at = ?, smtp_reply = coalesce(("
                    " SELECT CASE WHEN s.source IN (?, ?) THEN s.source END FROM suppressions s"
                    " WHERE s.list = deliveries.list AND s.address = deliveries.recipient), ?)"
                    f" WHERE issue = ? AND list = ? AND {FREE} AND recipient IN"
                    " (SELECT address FROM suppressions WHERE list = ?)",
                    (
                        *(S.SKIPPED.value, stamp, BOUNCED, COMPLAINED, UNSUBSCRIBED),
                        *(issue, list_name, list_name),
                    ),
                )
            if start.before:
                skipped += db.run(
                    f"UPDATE deliveries SET state = ?, smtp_reply = ?, updated_at = ?"
                    f" WHERE issue = ? AND list = ? AND {FREE} AND seen <> ?",
                    (S.SKIPPED.value, DEPARTED, stamp, issue, list_name, start.generation),
                )
            total = self._count(issue, list_name)
            (waiting,) = db.fetch(
                "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ?"
                " AND state IN ('pending', 'deferred')",
                (issue, list_name),
            )[0]
            db.run(
                "UPDATE plans SET planned_by = ? WHERE issue = ? AND list = ? AND generation = ?",
                (start.planner, issue, list_name, start.generation),
            )
        return PlanResult(
            added=total - start.before, skipped=skipped, total=total, waiting=int(waiting)
        )

    def _count(self, issue: int, list_name: str) -> int:
        (n,) = self.backend.fetch(
            "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ?", (issue, list_name)
        )[0]
        return int(n)
