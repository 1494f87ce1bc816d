"""Scheduled sends: an (issue, list) and a moment in; the schedule's claims, leases and outcome,
recorded once, out.

`newsletter send --at` books a schedule; `newsletter worker` starts it when it falls due. A
schedule moves

    due -> started -> done | failed | stopped        (or: due -> missed | failed | cancelled)

`started` is a worker's claim, for `lease` seconds on the database's clock and renewed while
the worker lives: one worker among any number on PostgreSQL takes it (SKIP LOCKED), and a claim
whose lease ran out (a worker killed, a machine gone) is taken by the next look of another,
which resumes the send (the send's own log decides who gets what). `launched_at` is set once the
send was first started: a schedule that never started is `missed` when it is found more than
the grace late; one that started is always resumed. At most one schedule of an (issue, list)
waits or runs at a time (a partial UNIQUE index, so two bookings at once cannot both win).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from newsletter.database.backend import Backend
from newsletter.database.records import now


class ScheduleState(StrEnum):
    DUE = "due"  # waiting for its time
    STARTED = "started"  # a worker holds it and runs the send
    DONE = "done"  # the send ran to its end (its outcome says how each recipient fared)
    FAILED = "failed"  # not sent: the issue failed its check, or the send refused to start
    STOPPED = "stopped"  # the send stopped (breaker, quota, rates): resume it by hand
    MISSED = "missed"  # no worker ran within the grace after its time: not sent
    CANCELLED = "cancelled"


OPEN = (ScheduleState.DUE, ScheduleState.STARTED)


@dataclass(frozen=True)
class Schedule:
    id: int
    issue: int
    list: str
    due_at: float  # Unix seconds
    zone: str  # the IANA zone it was given in
    state: ScheduleState
    created_at: str
    created_by: str
    owner: str | None
    started_at: str | None
    started_by: str  # every worker that started (or resumed) it, in order
    finished_at: str | None
    outcome: str
    rate: float | None = None  # `send --rate` kept for the worker's send (None: [send] rate)
    concurrency: int | None = None  # `send --concurrency` likewise


def kept_options(schedule: Schedule) -> list[str]:
    """The `send` options a schedule keeps, as the worker passes them on."""
    options = []
    if schedule.rate is not None:
        options += ["--rate", f"{schedule.rate:g}"]
    if schedule.concurrency is not None:
        options += ["--concurrency", str(schedule.concurrency)]
    return options


_COLUMNS = (
    "id, issue, list, due_at, zone, state, created_at, created_by, owner, started_at,"
    " started_by, finished_at, outcome, rate, concurrency"
)


def _schedule(row: Sequence[object]) -> Schedule:
    values = list(row)
    return Schedule(
        id=int(str(values[0])),
        issue=int(str(values[1])),
        list=str(values[2]),
        due_at=float(str(values[3])),
        zone=str(values[4]),
        state=ScheduleState(str(values[5])),
        created_at=str(values[6]),
        created_by=str(values[7]),
        owner=None if values[8] is None else str(values[8]),
        started_at=None if values[9] is None else str(values[9]),
        started_by=str(values[10]),
        finished_at=None if values[11] is None else str(values[11]),
        outcome=str(values[12]),
        rate=None if values[13] is None else float(str(values[13])),
        concurrency=None if values[14] is None else int(str(values[14])),
    )


class Schedules:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def book(
        self,
        issue: int,
        list_name: str,
        due_at: float,
        zone: str,
        by: str,
        *,
        rate: float | None = None,
        concurrency: int | None = None,
    ) -> Schedule | None:
        """A new schedule, or None when one of the same (issue, list) already waits or runs.
        `rate` and `concurrency` are kept for the send (None: the config's at the time)."""
        stamp = now()
        with self.backend.transaction():
            rows = self.backend.fetch(
                "INSERT INTO schedules (issue, list, due_at, zone, created_at, created_by,"
                " updated_at, rate, concurrency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                f" ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
                (issue, list_name, due_at, zone, stamp, by, stamp, rate, concurrency),
            )
        return _schedule(rows[0]) if rows else None

    def pending(self, issue: int, list_name: str) -> Schedule | None:
        """The schedule of (issue, list) that waits or runs, if any."""
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE issue = ? AND list = ?"
            " AND state IN ('due', 'started')",
            (issue, list_name),
        )
        return _schedule(rows[0]) if rows else None

    def last(self, issue: int, list_name: str) -> Schedule | None:
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM schedules WHERE issue = ? AND list = ?"
            " ORDER BY id DESC LIMIT 1",
            (issue, list_name),
        )
        return _schedule(rows[0]) if rows else None

    def cancel(self, issue: int, list_name: str | None, by: str) -> list[Schedule]:
        """The waiting schedules of `issue` (on `list_name`, or every list) cancelled; those
        cancelled. A started one is not: its send is under way."""
        stamp = now()
        where: str = "issue = ? AND state = 'due'"
        params: tuple[object, ...] = (issue,)
        if list_name is not None:
            where, params = f"{where} AND list = ?", (issue, list_name)
        with self.backend.transaction():
            rows = self.backend.fetch(
                "UPDATE schedules SET state = 'cancelled', outcome = ?,"
                f" finished_at = ?, updated_at = ? WHERE {where} RETURNING {_COLUMNS}",
                (f"cancelled by {by}", stamp, stamp, *params),
            )
        return [_schedule(r) for r in rows]

    def miss(self, grace: float, reason: str) -> list[Schedule]:
        """Every schedule that never started and is now more than `grace` seconds past its
        time (waiting, or claimed by a worker that died before it started the send): missed."""
        db = self.backend
        stamp = now()
        with db.transaction():
            rows = db.fetch(
                "UPDATE schedules SET state = 'missed', owner = NULL, lease_until = NULL,"
                " outcome = ?, finished_at = ?, updated_at = ?"
                f" WHERE started_at IS NULL AND due_at < {db.clock} - ? AND (state = 'due'"
                f" OR (state = 'started' AND lease_until < {db.clock})) RETURNING {_COLUMNS}",
                (reason, stamp, stamp, grace),
            )
        return [_schedule(r) for r in rows]

    def claim(self, owner: str, lease: float) -> Schedule | None:
        """The oldest schedule due now (or held by a worker whose lease ran out), now `owner`'s
        for `lease` seconds; None when none is."""
        db = self.backend
        with db.transaction():
            rows = db.fetch(
                f"UPDATE schedules SET state = 'started', owner = ?, lease_until = {db.clock} + ?,"
                " updated_at = ? WHERE id IN (SELECT id FROM schedules WHERE"
                f" (state = 'due' AND due_at <= {db.clock}) OR (state = 'started' AND"
                f" lease_until < {db.clock}) ORDER BY due_at, id LIMIT 1 {db.skip_locked})"
                f" RETURNING {_COLUMNS}",
                (owner, lease, now()),
            )
        return _schedule(rows[0]) if rows else None

    def launched(self, schedule_id: int, owner: str) -> bool:
        """The send is being started by `owner`: it is never `missed` from now on, and
        `owner` joins the workers that started it. False when it is no longer `owner`'s."""
        db = self.backend
        stamp = now()
        with db.transaction():
            return (
                db.run(
                    "UPDATE schedules SET started_at = COALESCE(started_at, ?), started_by ="
                    " CASE WHEN started_by = '' THEN ? ELSE started_by || ', ' || ? END,"
                    " updated_at = ? WHERE id = ? AND owner = ? AND state = 'started'",
                    (stamp, owner, owner, stamp, schedule_id, owner),
                )
                == 1
            )

    def renew(self, owner: str, lease: float) -> int:
        db = self.backend
        with db.transaction():
            return db.run(
                f"UPDATE schedules SET lease_until = {db.clock} + ? WHERE owner = ?"
                " AND state = 'started'",
                (lease, owner),
            )

    def finish(self, schedule_id: int, owner: str, state: ScheduleState, outcome: str) -> bool:
        """The schedule's outcome, once; False when it is no longer `owner`'s."""
        stamp = now()
        with self.backend.transaction():
            return (
                self.backend.run(
                    "UPDATE schedules SET state = ?, outcome = ?, owner = NULL,"
                    " lease_until = NULL, finished_at = ?, updated_at = ?"
                    " WHERE id = ? AND owner = ? AND state = 'started'",
                    (state.value, outcome[:2000], stamp, stamp, schedule_id, owner),
                )
                == 1
            )

    def refuse(self, schedule: Schedule, owner: str, outcome: str) -> bool:
        """`failed` by its send's own check, before anything was planned: the start `launched`
        recorded for the process is undone (the schedule's earlier starts, as claimed, kept),
        so it reads as a send the check refused, not one a worker ran. False when it is no
        longer `owner`'s."""
        stamp = now()
        with self.backend.transaction():
            return (
                self.backend.run(
                    "UPDATE schedules SET state = 'failed', outcome = ?, owner = NULL,"
                    " lease_until = NULL, finished_at = ?, updated_at = ?, started_at = ?,"
                    " started_by = ? WHERE id = ? AND owner = ? AND state = 'started'",
                    (
                        outcome[:2000],
                        stamp,
                        stamp,
                        schedule.started_at,
                        schedule.started_by,
                        schedule.id,
                        owner,
                    ),
                )
                == 1
            )

    def release(self, schedule_id: int, owner: str, outcome: str = "") -> bool:
        """Handed back, due again at once (a worker stopping): the next look of any worker
        starts (or resumes) it."""
        with self.backend.transaction():
            return (
                self.backend.run(
                    "UPDATE schedules SET state = 'due', owner = NULL, lease_until = NULL,"
                    " outcome = ?, updated_at = ? WHERE id = ? AND owner = ? AND state = 'started'",
                    (outcome[:2000], now(), schedule_id, owner),
                )
                == 1
            )

    def postpone(self, schedule_id: int, owner: str, due_at: float, outcome: str) -> bool:
        """Handed back, due again at `due_at` (a send the warm-up's daily cap stopped: the
        next day). It was started, so it is never `missed`."""
        with self.backend.transaction():
            return (
                self.backend.run(
                    "UPDATE schedules SET state = 'due', due_at = ?, owner = NULL,"
                    " lease_until = NULL, outcome = ?, updated_at = ?"
                    " WHERE id = ? AND owner = ? AND state = 'started'",
                    (due_at, outcome[:2000], now(), schedule_id, owner),
                )
                == 1
            )

    def release_others(self, keep: str) -> int:
        """Every claim but `keep`'s handed back: the one worker SQLite allows knows the others
        are dead."""
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE schedules SET state = 'due', owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE state = 'started' AND owner <> ?",
                (now(), keep),
            )

    def next_due(self) -> float | None:
        """Seconds until the next schedule falls due (0: one is due now); None: none waits."""
        db = self.backend
        rows = db.fetch(f"SELECT min(due_at) - {db.clock} FROM schedules WHERE state = 'due'")
        value = rows[0][0] if rows else None
        return None if value is None else max(0.0, float(value))

    def listing(self, *, issue: int | None = None, limit: int = 50) -> list[Schedule]:
        """The schedules (of `issue`), the waiting and running first by time, then the
        latest ended."""
        where, params = ("WHERE issue = ?", (issue,)) if issue is not None else ("", ())
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM schedules {where} ORDER BY"
            " CASE WHEN state IN ('due', 'started') THEN 0 ELSE 1 END,"
            " CASE WHEN state IN ('due', 'started') THEN due_at ELSE -id END LIMIT ?",
            (*params, limit),
        )
        return [_schedule(r) for r in rows]

    def database_time(self) -> float:
        (moment,) = self.backend.fetch(f"SELECT {self.backend.clock}")[0]
        return float(moment)
