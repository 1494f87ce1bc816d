"""Each worker's last beat: a worker writes one row as it runs, `newsletter doctor` reads the
youngest. In the outbox, not in a file, so a doctor on one machine sees workers on others that
share a PostgreSQL outbox. Times are Unix seconds from the caller's clock, so a test can move it.
"""

from __future__ import annotations

from dataclasses import dataclass

from newsletter.database.backend import Backend

# A running worker beats this often; the doctor calls it alive while its last beat is younger
# than ALIVE_WITHIN (three beats missed is a worker stopped, hung, or cut off from the outbox).
BEAT_EVERY = 10.0
ALIVE_WITHIN = 3 * BEAT_EVERY
# A worker's row left by a crash is kept this long for the doctor to name, then dropped by the
# next beat of any worker, so the table holds the workers of the last day and no more.
FORGET_AFTER = 86400.0


@dataclass(frozen=True)
class Beat:
    worker: str
    host: str
    pid: int
    at: float


class Heartbeats:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def beat(self, worker: str, host: str, pid: int, now: float) -> None:
        with self.backend.transaction():
            self.backend.run(
                "INSERT INTO heartbeats (worker, host, pid, beat_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (worker) DO UPDATE SET beat_at = excluded.beat_at",
                (worker, host, pid, now),
            )
            self.backend.run("DELETE FROM heartbeats WHERE beat_at < ?", (now - FORGET_AFTER,))

    def latest(self) -> Beat | None:
        """The youngest beat of any worker, None when no worker ever beat (or not for a day)."""
        rows = self.backend.fetch(
            "SELECT worker, host, pid, beat_at FROM heartbeats ORDER BY beat_at DESC LIMIT 1", ()
        )
        if not rows:
            return None
        worker, host, pid, at = rows[0]
        return Beat(str(worker), str(host), int(pid), float(at))
