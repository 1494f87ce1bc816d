"""Workers sharing a send: registrations and claims in, the rows each holds and the dead ones out.

A worker registers with a lease it renews, timed by the database's clock; it claims free due rows
a batch at a time (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two workers never take the same
row) and each outcome its journal commits frees the row again. A send claims ahead of its
sessions (`send_claim`: sent without waiting for the reply, telling in the same statement which
rows' recipients are suppressed now); a claim sets `owner`, never `sending`. `reap` ends the
leases that expired: the dead worker's rows not yet started go back to the pool (those it
claimed ahead among them); its rows in `sending` become `unknown` (their upload may have been
accepted), reported and resent only on request. A worker that was only paused finds its lease
gone (`renew` says so) and its rows no longer its own (the journal's owner checks).
"""

from __future__ import annotations

from collections.abc import Sequence

from newsletter.database.backend import Backend, Landing, Params
from newsletter.database.records import (
    COLUMNS,
    FREE,
    IN_DOUBT,
    Delivery,
    Worker,
    delivery_from_row,
    now,
)
from newsletter.models import DeliveryStatus

S = DeliveryStatus
# Whether a claimed row's recipient is suppressed on its list now (an unsubscribe since the
# plan), read by the claim itself: one probe of the suppressions' primary key a row, in the
# claim's own round trip (addresses are stored folded on both sides).
_SUPPRESSED = (
    "EXISTS (SELECT 1 FROM suppressions WHERE suppressions.list = deliveries.list"
    " AND suppressions.address = deliveries.recipient)"
)


class Leases:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def register(
        self, worker: str, issue: int, list_name: str, host: str, pid: int, lease: float
    ) -> None:
        stamp = now()
        self.backend.run(
            "INSERT INTO workers (id, issue, list, host, pid, started_at, seen_at, lease_until)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, {self.backend.clock} + ?)",
            (worker, issue, list_name, host, pid, stamp, stamp, lease),
        )

    def renew(self, worker: str, lease: float) -> bool:
        """Extend the lease; False if it had expired and was reaped (the worker must stop)."""
        renewed = self.backend.run(
            f"UPDATE workers SET seen_at = ?, lease_until = {self.backend.clock} + ?"
            " WHERE id = ? AND state = 'active'",
            (now(), lease, worker),
        )
        return renewed == 1

    def retire(self, worker: str) -> None:
        """The worker is done: rows it claimed and never started are free again."""
        db = self.backend
        with db.transaction():
            db.run(
                "UPDATE deliveries SET owner = NULL WHERE owner = ?"
                " AND state IN ('pending', 'deferred')",
                (worker,),
            )
            # A worker reaped while it was paused stays `dead` in the record.
            db.run("UPDATE workers SET state = 'done' WHERE id = ? AND state = 'active'", (worker,))

    def reap(self, issue: int, list_name: str, *, dead: Sequence[str] = ()) -> list[Delivery]:
        """End every expired lease on this send (and those of `dead`, workers known to have
        died): their unstarted rows go back, their uploads in flight become `unknown`
        (returned, for the report)."""
        db = self.backend
        with db.transaction():
            # Expired leases; and workers reaped or retired already that still hold rows (a
            # reaped worker that woke, claimed before its next renewal told it, then died).
            dead = [*dead] + [
                r[0]
                for r in db.fetch(
                    "SELECT id FROM workers WHERE issue = ? AND list = ? AND (state = 'active'"
                    f" AND lease_until < {db.clock} OR state <> 'active' AND EXISTS"
                    " (SELECT 1 FROM deliveries d WHERE d.owner = workers.id))",
                    (issue, list_name),
                )
            ]
            lost: list[Delivery] = []
            for worker in dict.fromkeys(dead):
                # Every row of the worker at once, or none: a worker writing one of its rows
                # right now (paused past its lease, then woken) is reaped at the next try.
                # Waiting for that row while holding another of the worker's, which the
                # worker's commit might need next, could make the two wait in a circle.
                if db.shared and not db.lock_at_once(
                    "SELECT id FROM deliveries WHERE owner = ? FOR UPDATE NOWAIT", (worker,)
                ):
                    continue
                db.run("UPDATE workers SET state = 'dead' WHERE id = ?", (worker,))
                db.run(
                    "UPDATE deliveries SET owner = NULL WHERE owner = ?"
                    " AND state IN ('pending', 'deferred')",
                    (worker,),
                )
                lost += map(
                    delivery_from_row,
                    db.fetch(
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
            where += "" if expired else f" AND lease_until >= {self.backend.clock}"
        rows = self.backend.fetch(
            "SELECT id, issue, list, host, pid, started_at, seen_at, lease_until, state"
            f" FROM workers WHERE issue = ? AND list = ?{where} ORDER BY started_at, id",
            (issue, list_name),
        )
        return [Worker(*r) for r in rows]

    # -- claims -------------------------------------------------------------------------------

    def claim(
        self,
        issue: int,
        list_name: str,
        worker: str,
        limit: int,
        *,
        max_tries: int,
        at: float,
        skip: Sequence[str] = (),
    ) -> list[Delivery]:
        """Up to `limit` free rows due at `at` (Unix time) that this run has tried fewer than
        `max_tries` times, now owned by `worker`, oldest first; none to the recipient domains
        in `skip` (they asked us to slow down: the engine's pacing)."""
        sql, params = self._claim(issue, list_name, worker, limit, max_tries, at, skip, "")
        rows = self.backend.fetch(sql, params)
        return sorted((delivery_from_row(r) for r in rows), key=lambda d: d.id)

    def send_claim(
        self,
        issue: int,
        list_name: str,
        worker: str,
        limit: int,
        *,
        max_tries: int,
        at: float,
        skip: Sequence[str] = (),
    ) -> Claim:
        """`claim`, sent without waiting for the database's reply where it is a server (the
        send goes on meanwhile), each row with whether its recipient is suppressed on the
        list now."""
        suppressed = f", {_SUPPRESSED}"
        sql, params = self._claim(issue, list_name, worker, limit, max_tries, at, skip, suppressed)
        return Claim(self.backend.send_fetch(sql, params))

    def _claim(
        self,
        issue: int,
        list_name: str,
        worker: str,
        limit: int,
        max_tries: int,
        at: float,
        skip: Sequence[str],
        extra: str,
    ) -> tuple[str, Params]:
        """The claim's statement: `extra` is more it returns after COLUMNS."""
        sql = (
            f"UPDATE deliveries SET owner = ? WHERE id IN (SELECT id FROM deliveries"
            f" WHERE issue = ? AND list = ? AND {FREE} AND next_attempt_at <= ? AND tries < ?"
            f"{_skipped(skip)} AND {_ACTIVE} ORDER BY id LIMIT ? {self.backend.skip_locked})"
            f" RETURNING {COLUMNS}{extra}"
        )
        params = (worker, issue, list_name, at, max_tries, *_patterns(skip), worker, limit)
        return sql, params

    def next_due(
        self, issue: int, list_name: str, *, max_tries: int, skip: Sequence[str] = ()
    ) -> float | None:
        """When the next free row this run may still try falls due (None: there is none), of
        those not to the domains in `skip`."""
        (found,) = self.backend.fetch(
            f"SELECT min(next_attempt_at) FROM deliveries WHERE issue = ? AND list = ?"
            f" AND {FREE} AND tries < ?{_skipped(skip)}",
            (issue, list_name, max_tries, *_patterns(skip)),
        )[0]
        return None if found is None else float(found)

    def held_by_others(self, issue: int, list_name: str, worker: str) -> int:
        """Rows other workers hold: waiting for them (or their lease) before calling it done."""
        (n,) = self.backend.fetch(
            "SELECT count(*) FROM deliveries WHERE owner IS NOT NULL AND owner <> ?"
            " AND issue = ? AND list = ?",
            (worker, issue, list_name),
        )[0]
        return int(n)


class Claim:
    """A claim on its way: `landing` to watch for the database's reply, then `taken`."""

    def __init__(self, landing: Landing) -> None:
        self.landing = landing

    def taken(self) -> tuple[list[Delivery], list[Delivery]]:
        """Once landed: the rows claimed, oldest first, as (to send, suppressed now)."""
        send: list[Delivery] = []
        suppressed: list[Delivery] = []
        for values in sorted(self.landing.rows[0], key=lambda r: int(r[0])):
            (suppressed if values[-1] else send).append(delivery_from_row(values))
        return send, suppressed


# A worker reaped while it was paused (or retired) claims nothing more: its next renewal tells
# it to stop.
_ACTIVE = "NOT EXISTS (SELECT 1 FROM workers WHERE id = ? AND state <> 'active')"


def _skipped(domains: Sequence[str]) -> str:
    return "".join(" AND recipient NOT LIKE ? ESCAPE '!'" for _ in domains)


def _patterns(domains: Sequence[str]) -> list[str]:
    """`%@domain`, its LIKE wildcards escaped (a recipient is stored with its domain folded)."""
    escaped = (d.replace("!", "!!").replace("%", "!%").replace("_", "!_") for d in domains)
    return [f"%@{d}" for d in escaped]
