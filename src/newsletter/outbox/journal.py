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

from newsletter.models import DeliveryStatus
from newsletter.outbox.backend import Backend, Statement
from newsletter.outbox.records import now

S = DeliveryStatus
_SENDING = S.SENDING.value
_MARK = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ?,"
    " message_id = coalesce(message_id, ?) WHERE id = ?"
)
_MARK_KNOWN = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?"
)
_RECORD = (
    "UPDATE deliveries SET state = ?, smtp_code = ?, smtp_reply = ?, updated_at = ?,"
    " next_attempt_at = ?, attempts = attempts + ?, tries = tries + 1, owner = NULL,"
    " sent_at = CASE WHEN ? THEN ? ELSE sent_at END WHERE id = ?"
)
_OWNED = " AND owner = ?"


class Journal:
    """The entries of one worker (`owner`; None: no owner check, for tools and tests) waiting
    for their commit."""

    def __init__(self, backend: Backend, owner: str | None) -> None:
        self.backend = backend
        self.owner = owner
        self._queued: list[tuple[int, Statement]] = []  # (row id, statement), in order

    def __len__(self) -> int:
        return len(self._queued)

    def mark(self, row_id: int, message_id: str | None) -> None:
        """The row is being uploaded (the server answered DATA with 354): the start of the
        in-doubt window. The first Message-ID stored stays the row's for every later attempt;
        None says the row holds it already (planned with it), which keeps the column's index
        out of the commit."""
        if message_id is None:
            self._queue(row_id, _MARK_KNOWN, [_SENDING, now(), row_id])
            return
        self._queue(row_id, _MARK, [_SENDING, now(), message_id, row_id])

    def record(
        self,
        row_id: int,
        state: DeliveryStatus,
        *,
        code: int | None = None,
        reply: str = "",
        next_attempt_at: float = 0.0,
        attempted: bool = False,
    ) -> None:
        """An outcome; the row is free to claim again (if it is due). `attempted` counts an
        attempt that never reached `sending` (refused at MAIL or RCPT)."""
        stamp = now()
        params: list[object] = [
            state.value,  # a plain str binds faster than the StrEnum
            code,
            reply,
            stamp,
            next_attempt_at,
            1 if attempted else 0,
            state == S.SENT,
            stamp,
            row_id,
        ]
        self._queue(row_id, _RECORD, params)

    def commit(self) -> list[bool]:
        """Every queued entry in one transaction and one commit; for each, in the order
        queued, whether it was written (False: the owner no longer holds the row). The
        statements go in row order, the order a reaper locks a worker's rows in (leases.py):
        two transactions on the same rows never wait for each other in a circle."""
        queued, self._queued = self._queued, []
        if not queued:
            return []
        order = sorted(range(len(queued)), key=lambda i: queued[i][0])
        counts = self.backend.commit([queued[i][1] for i in order])
        written = [False] * len(queued)
        for i, count in zip(order, counts, strict=True):
            written[i] = count == 1
        return written

    def discard(self) -> int:
        """Drop what is queued (the process is giving up on them); how many there were."""
        dropped, self._queued = len(self._queued), []
        return dropped

    def _queue(self, row_id: int, sql: str, params: list[object]) -> None:
        if self.owner is not None:
            sql += _OWNED
            params.append(self.owner)
        self._queued.append((row_id, (sql, params)))
