"""A send shared by workers: list batches in, claimed rows out, under leases timed by the database.

Planning streams the list into the outbox (`start_plan`, `add` a batch at a time, `finish_plan`):
each batch is one upsert, the row is the snapshot (address as written, name, Message-ID), the
UNIQUE key dedupes, and the last steps skip, in the database, waiting rows whose address is
suppressed or was not on the list this time. Nothing the size of the list is held in memory.

A worker registers with a lease it renews; it claims free due rows a batch at a time
(`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two workers never take the same row) and records
each outcome, which frees the row. `reap` ends the leases that expired: the dead worker's rows
not yet started go back to the pool; its rows in `sending` become `unknown` (their upload may
have been accepted), reported and resent only on request.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import NamedTuple

from newsletter.models import DeliveryStatus
from newsletter.outbox.records import (
    BOUNCED,
    COLUMNS,
    COMPLAINED,
    DEPARTED,
    IN_DOUBT,
    UNSUBSCRIBED,
    Delivery,
    PlanResult,
    delivery,
    now,
)
from newsletter.outbox.store import Store

S = DeliveryStatus
# Literal, not bound: the planner uses the partial index `deliveries_free` only when the query
# repeats its predicate word for word.
FREE = "state IN ('pending', 'deferred') AND owner IS NULL"


class Planned(NamedTuple):
    """One subscriber as planning stores it: the key, the address as sent, name, Message-ID."""

    recipient: str
    envelope: str
    name: str
    message_id: str | None


# A Planned, or the plain tuple the list's reader sends (cheaper to pickle).
PlannedRow = tuple[str, str, str, str | None]


@dataclass(frozen=True)
class Worker:
    id: str
    issue: int
    list: str
    host: str
    pid: int
    started_at: str
    seen_at: str
    lease_until: float
    state: str


@dataclass(frozen=True)
class PlanStart:
    generation: int
    before: int
    planner: str


class Runs(Store):
    # SQL after a claim's inner SELECT: PostgreSQL skips rows another worker is claiming.
    skip_locked = ""

    def plan_lock(self, issue: int, list_name: str) -> AbstractContextManager[None]:
        """Held while one worker plans (issue, list); the others wait for it. SQLite: the
        flock of the send lock already excludes every other send."""
        return nullcontext()

    # -- planning ---------------------------------------------------------------------------

    def plan_is_current(self, issue: int, list_name: str) -> bool:
        """True if a worker still running finished planning this send (the others share its
        plan). A plan whose planner died halfway (its lease may run for a while yet) names no
        planner: the next worker plans again."""
        found = self._fetch(
            "SELECT 1 FROM plans p JOIN workers w ON w.id = p.planned_by"
            " WHERE p.issue = ? AND p.list = ? AND w.state = 'active'"
            f" AND w.lease_until >= {self.clock}",
            (issue, list_name),
        )
        return bool(found)

    def start_plan(self, issue: int, list_name: str, worker: str) -> PlanStart:
        """A new plan generation; this run's attempt counts start again at zero. The plan
        names its planner only once `finish_plan` has run."""
        with self._write():
            self._run(
                "INSERT INTO plans (issue, list, generation, planned_at, planned_by)"
                " VALUES (?, ?, 1, ?, '') ON CONFLICT (issue, list) DO UPDATE SET"
                " generation = plans.generation + 1, planned_at = excluded.planned_at,"
                " planned_by = ''",
                (issue, list_name, now()),
            )
            (generation,) = self._fetch(
                "SELECT generation FROM plans WHERE issue = ? AND list = ?", (issue, list_name)
            )[0]
            self._run(
                f"UPDATE deliveries SET tries = 0 WHERE issue = ? AND list = ? AND {FREE}"
                " AND tries > 0",
                (issue, list_name),
            )
            return PlanStart(int(generation), self._count(issue, list_name), worker)

    def add(self, issue: int, list_name: str, generation: int, batch: Sequence[PlannedRow]) -> None:
        """One batch of the list, in one transaction. A recipient already planned keeps its
        row (and its snapshot); a waiting one is marked as still on the list. Rows go in in key
        order: the UNIQUE key's and the reader index's inserts then touch neighbouring pages
        (a tenth less of planning a large list)."""
        stamp = now()
        with self._write():
            self._many(
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

    def finish_plan(self, issue: int, list_name: str, start: PlanStart) -> PlanResult:
        """Waiting rows whose address is suppressed, or was not on the list this time, become
        `skipped` with the reason; the counts of the plan."""
        stamp = now()
        skipped = 0
        with self._write():
            # Each step reads every waiting row: skipped when it cannot find any (no
            # suppressions; or a first plan, where every row was on the list just now).
            if self._fetch("SELECT 1 FROM suppressions WHERE list = ? LIMIT 1", (list_name,)):
                # The reason is the suppression's: `bounced` and `complained` say so, every
                # other source (one-click, web, cli) is the reader's or the editor's
                # `unsubscribed`.
                skipped += self._run(
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
                skipped += self._run(
                    f"UPDATE deliveries SET state = ?, smtp_reply = ?, updated_at = ?"
                    f" WHERE issue = ? AND list = ? AND {FREE} AND seen <> ?",
                    (S.SKIPPED.value, DEPARTED, stamp, issue, list_name, start.generation),
                )
            total = self._count(issue, list_name)
            self._run(
                "UPDATE plans SET planned_by = ? WHERE issue = ? AND list = ? AND generation = ?",
                (start.planner, issue, list_name, start.generation),
            )
        return PlanResult(added=total - start.before, skipped=skipped, total=total)

    def _count(self, issue: int, list_name: str) -> int:
        (n,) = self._fetch(
            "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ?", (issue, list_name)
        )[0]
        return int(n)

    # -- claims -----------------------------------------------------------------------------

    def claim(
        self, issue: int, list_name: str, worker: str, limit: int, *, max_tries: int, at: float
    ) -> list[Delivery]:
        """Up to `limit` free rows due at `at` (Unix time) that this run has tried fewer than
        `max_tries` times, now owned by `worker`, oldest first."""
        rows = self._fetch(
            f"UPDATE deliveries SET owner = ? WHERE id IN (SELECT id FROM deliveries"
            f" WHERE issue = ? AND list = ? AND {FREE} AND next_attempt_at <= ? AND tries < ?"
            f" ORDER BY id LIMIT ? {self.skip_locked}) RETURNING {COLUMNS}",
            (worker, issue, list_name, at, max_tries, limit),
        )
        return sorted((delivery(r) for r in rows), key=lambda d: d.id)

    def suppressed_among(self, worker: str, list_name: str) -> set[int]:
        """Ids of the rows `worker` holds whose address is suppressed now."""
        return {
            r[0]
            for r in self._fetch(
                "SELECT d.id FROM deliveries d JOIN suppressions s ON s.list = d.list"
                " AND s.address = d.recipient WHERE d.owner = ? AND d.list = ?",
                (worker, list_name),
            )
        }

    def next_due(self, issue: int, list_name: str, *, max_tries: int) -> float | None:
        """When the next free row this run may still try falls due (None: there is none)."""
        (found,) = self._fetch(
            f"SELECT min(next_attempt_at) FROM deliveries WHERE issue = ? AND list = ?"
            f" AND {FREE} AND tries < ?",
            (issue, list_name, max_tries),
        )[0]
        return None if found is None else float(found)

    def held_by_others(self, issue: int, list_name: str, worker: str) -> int:
        """Rows other workers hold: waiting for them (or their lease) before calling it done."""
        (n,) = self._fetch(
            "SELECT count(*) FROM deliveries WHERE owner IS NOT NULL AND owner <> ?"
            " AND issue = ? AND list = ?",
            (worker, issue, list_name),
        )[0]
        return int(n)

    # -- workers and leases -----------------------------------------------------------------

    def register(
        self, worker: str, issue: int, list_name: str, host: str, pid: int, lease: float
    ) -> None:
        stamp = now()
        self._run(
            "INSERT INTO workers (id, issue, list, host, pid, started_at, seen_at, lease_until)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, {self.clock} + ?)",
            (worker, issue, list_name, host, pid, stamp, stamp, lease),
        )

    def renew(self, worker: str, lease: float) -> bool:
        """Extend the lease; False if it had expired and was reaped (the worker must stop)."""
        return (
            self._run(
                f"UPDATE workers SET seen_at = ?, lease_until = {self.clock} + ?"
                " WHERE id = ? AND state = 'active'",
                (now(), lease, worker),
            )
            == 1
        )

    def retire(self, worker: str) -> None:
        """The worker is done: rows it claimed and never started are free again."""
        with self._write():
            self._run(
                "UPDATE deliveries SET owner = NULL WHERE owner = ?"
                " AND state IN ('pending', 'deferred')",
                (worker,),
            )
            # A worker reaped while it was paused stays `dead` in the record.
            self._run(
                "UPDATE workers SET state = 'done' WHERE id = ? AND state = 'active'", (worker,)
            )

    def reap(self, issue: int, list_name: str, *, dead: Sequence[str] = ()) -> list[Delivery]:
        """End every expired lease on this send (and those of `dead`, workers known to have
        died): their unstarted rows go back, their uploads in flight become `unknown`
        (returned, for the report)."""
        with self._write():
            dead = [*dead] + [
                r[0]
                for r in self._fetch(
                    "SELECT id FROM workers WHERE issue = ? AND list = ? AND state = 'active'"
                    f" AND lease_until < {self.clock}",
                    (issue, list_name),
                )
            ]
            lost: list[Delivery] = []
            for worker in dict.fromkeys(dead):
                self._run("UPDATE workers SET state = 'dead' WHERE id = ?", (worker,))
                self._run(
                    "UPDATE deliveries SET owner = NULL WHERE owner = ?"
                    " AND state IN ('pending', 'deferred')",
                    (worker,),
                )
                lost += map(
                    delivery,
                    self._fetch(
                        "UPDATE deliveries SET state = ?, smtp_reply = ?, updated_at = ?,"
                        f" owner = NULL WHERE owner = ? RETURNING {COLUMNS}",
                        (S.UNKNOWN.value, IN_DOUBT, now(), worker),
                    ),
                )
        return sorted(lost, key=lambda d: d.id)

    def workers(
        self, issue: int, list_name: str, *, active: bool = True, expired: bool = False
    ) -> list[Worker]:
        """The workers of a send, oldest first: by default those whose lease runs; with
        `expired`, also the registered ones whose lease ran out and no run has reaped yet
        (what `status` shows as gone); with `active=False`, every one ever registered."""
        where = ""
        if active:
            where = " AND state = 'active'"
            where += "" if expired else f" AND lease_until >= {self.clock}"
        rows = self._fetch(
            "SELECT id, issue, list, host, pid, started_at, seen_at, lease_until, state"
            f" FROM workers WHERE issue = ? AND list = ?{where} ORDER BY started_at, id",
            (issue, list_name),
        )
        return [Worker(*r) for r in rows]
