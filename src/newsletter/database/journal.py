"""What one worker's send writes as it goes: `sending` marks and outcomes in, one commit out.

The rule every kill test rests on: a body goes out only after its row's `sending` mark is
committed, and an outcome is committed no later than the mark of the next body (the engine
waits for the mark's commit, and a commit carries every entry queued before it). So a crash
leaves in doubt only the uploads in flight and the outcomes that came back since the last
commit: the rows still `sending`, which the next run reports `unknown` and never resends on its
own. What a crash leaves at each instant:

    an entry queued, not committed     the row as it was (a mark: `pending`, its body never
                                       sent; an outcome: `sending`, reported `unknown`)
    during the commit                  all of the batch or none of it (one transaction)
    after the commit                   each entry as written

How far "committed" reaches is the backend's durability: "process" survives this process being
killed, "power" a power cut. Each entry holds only while `owner` still holds the row: a worker
reaped while paused (its rows are another's now, or `unknown`) gets False for it, never writes
over the row, and must stop before uploading a body.
"""

from __future__ import annotations

from newsletter.database.backend import Backend, Landing, Statement
from newsletter.database.records import now
from newsletter.models import DeliveryStatus

S = DeliveryStatus
_SENDING = S.SENDING.value
# One statement writes a whole batch, marks and outcomes alike: one row per entry (a mark
# leaves the outcome's columns as they are), joined to the rows by id. On PostgreSQL a statement
# costs the server more than the few rows it carries (see docs/benchmarks.md), and on both it is
# one transaction. The entries come as VALUES, so the planner knows how many (and joins them to
# the rows' primary key); the casts give every column its type when all of a batch's values in
# it are NULL.
_ENTRY = (
    "(CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER),"
    " CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS DOUBLE PRECISION), CAST(? AS INTEGER),"
    " CAST(? AS INTEGER), CAST(? AS INTEGER), CAST(? AS TEXT))"
)
_WRITE = (
    "UPDATE deliveries SET state = v.state, updated_at = v.stamp,"
    " attempts = deliveries.attempts + v.attempts, tries = deliveries.tries + v.tries,"
    " message_id = CASE WHEN v.mark = 1 THEN coalesce(deliveries.message_id, v.mid)"
    " ELSE deliveries.message_id END,"
    " smtp_code = CASE WHEN v.mark = 1 THEN deliveries.smtp_code ELSE v.code END,"
    " smtp_reply = CASE WHEN v.mark = 1 THEN deliveries.smtp_reply ELSE v.reply END,"
    " next_attempt_at = CASE WHEN v.mark = 1 THEN deliveries.next_attempt_at ELSE v.due END,"
    " owner = CASE WHEN v.mark = 1 THEN deliveries.owner END,"
    " sent_at = CASE WHEN v.sent = 1 THEN v.stamp ELSE deliveries.sent_at END,"
    " relay = coalesce(v.relay, deliveries.relay)"
    " FROM ({batch}) AS v WHERE deliveries.id = v.id{owned} RETURNING deliveries.id"
)
_VALUES = (
    "SELECT column1 AS id, column2 AS mark, column3 AS state, column4 AS stamp,"
    " column5 AS code, column6 AS reply, column7 AS mid, column8 AS due, column9 AS attempts,"
    " column10 AS tries, column11 AS sent, column12 AS relay FROM (VALUES {entries}) AS batch"
)
_OWNED = " AND deliveries.owner = ?"
_MOST = 1000
Entry = tuple[
    int, int, str, str, int | None, str | None, str | None, float, int, int, int, str | None
]


class Journal:
    """The entries of one worker (`owner`; None: no owner check, for tools and tests) waiting
    for their commit."""

    def __init__(self, backend: Backend, owner: str | None) -> None:
        self.backend = backend
        self.owner = owner
        self._queued: list[Entry] = []

    def __len__(self) -> int:
        return len(self._queued)

    def mark(self, row_id: int, message_id: str | None, relay: str = "") -> None:
        """The row is being uploaded (the server answered DATA with 354): the start of the
        in-doubt window. The first Message-ID stored stays the row's for every later attempt
        (None: the row holds it already, planned with it). `relay` names the relay the body
        goes to, so a row left in doubt says where."""
        self._queued.append(
            (row_id, 1, _SENDING, now(), None, None, message_id, 0.0, 1, 0, 0, relay or None)
        )

    def record(
        self,
        row_id: int,
        state: DeliveryStatus,
        *,
        code: int | None = None,
        reply: str = "",
        next_attempt_at: float = 0.0,
        attempted: bool = False,
        relay: str = "",
        counted: bool = True,
    ) -> None:
        """An outcome; the row is free to claim again (if it is due). `attempted` counts an
        attempt that never reached `sending` (refused at MAIL or RCPT); `relay` ("": the
        row's stays) the relay that answered. `counted` False: not a try of this run (a row
        handed back while its destination rests)."""
        self._queued.append(
            (
                row_id,
                0,
                state.value,  # a plain str binds faster than the StrEnum
                now(),
                code,
                reply,
                None,
                next_attempt_at,
                1 if attempted else 0,
                1 if counted else 0,
                1 if state == S.SENT else 0,
                relay or None,
            )
        )

    def commit(self) -> list[bool]:
        """Every queued entry in one transaction and one commit; for each, in the order
        queued, whether it was written (False: the owner no longer holds the row)."""
        return self.send().wait()

    def send(self) -> Commit:
        """`commit`, sent without waiting for the database's reply where it is a server (the
        worker goes on meanwhile); the entries are durable once the Commit has landed."""
        queued, self._queued = self._queued, []
        if not queued:
            return Commit(queued, [], Landing(rows=[]))
        # A row's second entry in one batch (a mark, then the outcome of an upload abandoned
        # before its body) goes into a statement after the first's, so both apply, in order;
        # and a statement carries at most _MOST entries (PostgreSQL binds at most 65,535 values).
        batches: list[list[int]] = [[]]
        rows: list[set[int]] = [set()]
        for index, entry in enumerate(queued):
            if entry[0] in rows[-1] or len(batches[-1]) == _MOST:
                batches.append([])
                rows.append(set())
            batches[-1].append(index)
            rows[-1].add(entry[0])
        statements = [self._statement(queued, b) for b in batches]
        return Commit(queued, batches, self.backend.send_commit(statements))

    def _statement(self, queued: list[Entry], batch: list[int]) -> Statement:
        chosen = [queued[i] for i in batch]
        rows = _VALUES.format(entries=", ".join([_ENTRY] * len(chosen)))
        params: list[object] = [value for entry in chosen for value in entry]
        if self.owner is None:
            return _WRITE.format(batch=rows, owned=""), params
        return _WRITE.format(batch=rows, owned=_OWNED), [*params, self.owner]


class Commit:
    """A journal's commit on its way: `landing` to watch, then `written` (or `wait`)."""

    def __init__(self, queued: list[Entry], batches: list[list[int]], landing: Landing) -> None:
        self.queued = queued
        self.batches = batches
        self.landing = landing

    def __len__(self) -> int:
        return len(self.queued)

    def wait(self) -> list[bool]:
        """Blocks until the commit has landed; `written`."""
        self.landing.wait()
        return self.written()

    def written(self) -> list[bool]:
        """For each entry, in the order queued, whether it was written (False: the owner no
        longer holds the row). Once landed only."""
        written = [False] * len(self.queued)
        for batch, found in zip(self.batches, self.landing.rows, strict=True):
            ids = {row[0] for row in found}
            for index in batch:
                written[index] = self.queued[index][0] in ids
        return written
