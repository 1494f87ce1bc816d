"""An in-memory ConfirmationClaims: the contract the outbox's store will meet, for the tests of
signup/pending.py (the same tests run against the database store once it exists)."""

from __future__ import annotations

import datetime as dt
import threading


class MemoryClaims:
    """Last confirmation per mailbox, claimed atomically under a lock."""

    def __init__(self) -> None:
        self.sent: dict[str, dt.datetime] = {}
        self._lock = threading.Lock()

    def claim(self, mailbox: str, now: dt.datetime, window: dt.timedelta) -> bool:
        with self._lock:
            last = self.sent.get(mailbox)
            if last is not None and now - last < window:
                return False
            self.sent[mailbox] = now
            return True
