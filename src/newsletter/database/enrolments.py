"""Readers in welcome sequences: a reader (list, address key) and a sequence in; their enrolment,
the due steps planned as rows of the delivery log, the counts per step out.

A step's rows are the delivery log's own: their issue is `step_key` (STEP_KEYS + the step's id in
`sequence_steps`), so the UNIQUE (issue, list, recipient) key makes a step once per reader
whoever plans it, and claims, leases, `unknown` and the counts work as for an issue. Planning a
reader's step and moving their enrolment on is one transaction; two workers planning the same
reader at once insert one row (the second insert does nothing) and move the enrolment once
(`step = ?` in the WHERE of the update). A reader is in a sequence once (UNIQUE (sequence,
address_key)), whichever of its lists enrolled them: the list that enrolled them first is the
one its steps go out on, so a reader on two of its lists gets each step once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from newsletter.database.backend import Backend
from newsletter.database.records import FREE, now

# Keys of the delivery log at and above this are sequence steps, never issues: an issue number
# this high is not one a newsletter reaches, and a click token still carries it (63 bits).
STEP_KEYS = 1_000_000_000
PAGE = 500  # readers planned per transaction
STEP_REMOVED = "its sequence step was removed"
STEP_LIST = 32  # step numbers a query names one by one, at most
# An enrolment's reader on its list, and whether a step would go to them: still confirmed
# there and not suppressed (an unsubscribe, a bounce, a complaint). THE rule for `due` and for
# the counts of readers waiting.
_READER = " JOIN subscribers s ON s.list = e.list AND s.address_key = e.address_key"
_REACHABLE = (
    "s.status = 'confirmed' AND NOT EXISTS (SELECT 1 FROM suppressions x"
    " WHERE x.list = e.list AND x.address = e.address_key)"
)


@dataclass(frozen=True)
class Due:
    """A reader whose next step is due: their enrolment, address and name as the roster has."""

    id: int
    list: str
    address_key: str
    address: str
    name: str
    step: int


class Enrolments:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def join(self, list_name: str, key: str, sequences: Iterable[str], at: float) -> int:
        """The reader joins each sequence at its start (one who is in it already, from this
        list or another, stays where they are: a step goes once per reader per sequence);
        how many they joined. In the caller's transaction, if any."""
        rows = [(name, list_name, key, at, at, "joined") for name in sequences]
        if not rows:
            return 0
        before = self._count_of(key)
        self.backend.many(
            "INSERT INTO enrolments (sequence, list, address_key, joined_at, last_at, source)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            rows,
        )
        return self._count_of(key) - before

    def enrol_list(self, sequence: str, list_name: str, at: float) -> int:
        """Every confirmed reader of the list joins the sequence at its start (the editor's
        command); those in it already (from any list) stay where they are. How many joined."""
        with self.backend.transaction():
            return self.backend.run(
                "INSERT INTO enrolments (sequence, list, address_key, joined_at, last_at, source)"
                " SELECT ?, list, address_key, ?, ?, 'enrolled' FROM subscribers"
                " WHERE list = ? AND status = 'confirmed'"
                " ON CONFLICT DO NOTHING",
                (sequence, at, at, list_name),
            )

    def step_key(self, sequence: str, step: int) -> int:
        """The delivery log's issue number of a step, the same on every machine for ever."""
        with self.backend.transaction():
            self.backend.run(
                "INSERT INTO sequence_steps (sequence, step) VALUES (?, ?)"
                " ON CONFLICT (sequence, step) DO NOTHING",
                (sequence, step),
            )
            (found,) = self.backend.fetch(
                "SELECT id FROM sequence_steps WHERE sequence = ? AND step = ?", (sequence, step)
            )[0]
        return STEP_KEYS + int(found)

    def step_of(self, key: int) -> tuple[str, int] | None:
        """(sequence, step) of a delivery log key, or None if it is not a step's."""
        found = self.backend.fetch(
            "SELECT sequence, step FROM sequence_steps WHERE id = ?", (key - STEP_KEYS,)
        )
        return (str(found[0][0]), int(found[0][1])) if found else None

    def due(
        self,
        sequence: str,
        after: int,
        before: int,
        cutoff: float,
        *,
        from_joining: bool,
        limit: int = PAGE,
    ) -> list[Due]:
        """Readers of the sequence whose last step is in [after, before) and whose clock
        (joining, or their last step) is at or before `cutoff`, still confirmed on the list
        and not suppressed there: the ones the step numbered `before` is due to."""
        clock = "joined_at" if from_joining else "last_at"
        steps, values = _steps(after, before)
        rows = self.backend.fetch(
            "SELECT e.id, e.list, e.address_key, s.address, s.name, e.step FROM enrolments e"
            f"{_READER} WHERE e.sequence = ? AND {steps} AND e.{clock} <= ? AND {_REACHABLE}"
            " LIMIT ?",
            (sequence, *values, cutoff, limit),
        )
        return [
            Due(int(i), str(li), str(k), str(a), str(n), int(st)) for i, li, k, a, n, st in rows
        ]

    def plan(
        self, key: int, step: int, readers: Sequence[Due], message_ids: Sequence[str], at: float
    ) -> int:
        """The step's row for each reader, and their enrolment moved on to it, in one
        transaction; how many enrolments this call moved (another worker may have first)."""
        stamp = now()
        with self.backend.transaction():
            self.backend.many(
                "INSERT INTO deliveries (issue, list, recipient, envelope, name, message_id,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (issue, list, recipient) DO NOTHING",
                [
                    (key, r.list, r.address_key, r.address, r.name, mid, stamp, stamp)
                    for r, mid in zip(readers, message_ids, strict=True)
                ],
            )
            moved = 0
            for r in readers:
                moved += self.backend.run(
                    "UPDATE enrolments SET step = ?, last_at = ? WHERE id = ? AND step = ?",
                    (step, at, r.id, r.step),
                )
        return moved

    def waiting(self) -> list[tuple[int, str]]:
        """(step key, list) of every step with rows free to send."""
        rows = self.backend.fetch(
            f"SELECT DISTINCT issue, list FROM deliveries WHERE issue >= ? AND {FREE}",
            (STEP_KEYS,),
        )
        return sorted((int(i), str(li)) for i, li in rows)

    def retry(self, key: int, list_name: str) -> None:
        """A new look tries the step's deferred rows again (a run's max_attempts counts anew)."""
        self.backend.run(
            f"UPDATE deliveries SET tries = 0 WHERE issue = ? AND list = ? AND {FREE}"
            " AND tries > 0",
            (key, list_name),
        )

    def held(self) -> list[tuple[int, str]]:
        """(step key, list) of every step with rows a worker holds (claimed or uploading)."""
        rows = self.backend.fetch(
            "SELECT DISTINCT issue, list FROM deliveries WHERE owner IS NOT NULL AND issue >= ?",
            (STEP_KEYS,),
        )
        return sorted((int(i), str(li)) for i, li in rows)

    def skip_removed(self, key: int, list_name: str) -> int:
        """A removed step's rows that had not gone out are `skipped`, saying so."""
        return self.backend.run(
            f"UPDATE deliveries SET state = 'skipped', smtp_reply = ?, updated_at = ?"
            f" WHERE issue = ? AND list = ? AND {FREE}",
            (STEP_REMOVED, now(), key, list_name),
        )

    def at_steps(self, sequence: str, *, reachable: bool = False) -> dict[int, int]:
        """How many readers have had each step number last (0: none yet); `reachable`: only
        those a next step would go to (still confirmed, not suppressed), as `due` finds them."""
        where = (
            f"{_READER} WHERE e.sequence = ? AND {_REACHABLE}"
            if reachable
            else (" WHERE e.sequence = ?")
        )
        rows = self.backend.fetch(
            f"SELECT e.step, count(*) FROM enrolments e{where} GROUP BY e.step", (sequence,)
        )
        return {int(step): int(n) for step, n in rows}

    def next_at(
        self, sequence: str, after: int, before: int, *, from_joining: bool
    ) -> float | None:
        """The earliest clock (joining or last step) among readers waiting for the step
        numbered `before` (those `due` would find once it is due): that plus its delay is when
        it next falls due."""
        clock = "joined_at" if from_joining else "last_at"
        steps, values = _steps(after, before)
        (found,) = self.backend.fetch(
            f"SELECT min(e.{clock}) FROM enrolments e{_READER}"
            f" WHERE e.sequence = ? AND {steps} AND {_REACHABLE}",
            (sequence, *values),
        )[0]
        return None if found is None else float(found)

    def of(self, key: str) -> list[tuple[str, str, int, float]]:
        """The person's places in sequences: (sequence, list, last step, joined at)."""
        rows = self.backend.fetch(
            "SELECT sequence, list, step, joined_at FROM enrolments WHERE address_key = ?"
            " ORDER BY id",
            (key,),
        )
        return [(str(q), str(li), int(st), float(at)) for q, li, st, at in rows]

    def erase(self, key: str) -> int:
        """Every enrolment of the person (erasure); how many."""
        return self.backend.run("DELETE FROM enrolments WHERE address_key = ?", (key,))

    def _count_of(self, key: str) -> int:
        (n,) = self.backend.fetch("SELECT count(*) FROM enrolments WHERE address_key = ?", (key,))[
            0
        ]
        return int(n)


def _steps(after: int, before: int) -> tuple[str, list[int]]:
    """The readers whose last step is in [after, before), in SQL. The numbers one by one when
    they are few (the usual: the one step before): each an equality on the index, so the clock's
    range is read from the index too, and a look that finds nobody due reads a few pages instead
    of every reader past that step."""
    numbers = list(range(after, before))
    if 0 < len(numbers) <= STEP_LIST:
        return f"e.step IN ({', '.join('?' * len(numbers))})", numbers
    return "e.step >= ? AND e.step < ?", [after, before]
