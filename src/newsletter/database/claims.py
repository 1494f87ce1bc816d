"""When each mailbox was last sent a confirmation: a claim in, granted or not out (the store
behind signup/pending.py's one-confirmation-per-mailbox rule).

A claim is one statement, so two posts at the same instant, on one machine or many, cannot both
win: the row is inserted, or updated only where the last claim is older than the window; a row
back means granted. Times are Unix seconds from the caller's clock (the rule's `now`), so a
test can move it.
"""

from __future__ import annotations

import datetime as dt

from newsletter.database.backend import Backend


class ConfirmationClaims:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def claim(self, mailbox: str, now: dt.datetime, window: dt.timedelta) -> bool:
        """Record `now` for `mailbox` unless it was claimed after `now - window`; whether it
        was recorded. A claim in the future (a clock set back) counts as recent."""
        moment = now.timestamp()
        with self.backend.transaction():
            rows = self.backend.fetch(
                "INSERT INTO confirmation_claims (mailbox_key, sent_at) VALUES (?, ?)"
                " ON CONFLICT (mailbox_key) DO UPDATE SET sent_at = excluded.sent_at"
                " WHERE confirmation_claims.sent_at <= ? RETURNING mailbox_key",
                (mailbox, moment, moment - window.total_seconds()),
            )
        return bool(rows)

    def last(self, mailbox: str) -> dt.datetime | None:
        rows = self.backend.fetch(
            "SELECT sent_at FROM confirmation_claims WHERE mailbox_key = ?", (mailbox,)
        )
        return dt.datetime.fromtimestamp(float(rows[0][0]), dt.UTC) if rows else None

    def erase(self, mailbox: str) -> int:
        with self.backend.transaction():
            return self.backend.run(
                "DELETE FROM confirmation_claims WHERE mailbox_key = ?", (mailbox,)
            )
