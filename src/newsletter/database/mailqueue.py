"""The site's own mail (confirmations, welcome mails, address-change confirmations) waiting for
`newsletter worker`: a queued mail in, claims and each one's outcome, recorded once, out.

`serve` never speaks SMTP: a signup queues its mail in the same transaction as the claim and
the subscriber's row, and a worker sends it. A mail moves

    due -> claimed -> sending -> sent | rejected | failed        (or back to due: deferred)

`claimed` (a worker took it, nothing went out yet) is committed before the worker connects;
`sending` once the server answered DATA with 354, before the body goes out; the outcome as
soon as the server answers. A worker that dies leaves its claimed mail to go back to `due`
(nothing of it was uploaded) and its mail in `sending` to become `unknown`, never sent again:
at most once is the promise here (a second confirmation is worse than a lost one, which the
reader can ask for again). A claim lasts `lease` seconds on the database's clock, renewed while
the worker lives; on PostgreSQL any number of workers claim with SKIP LOCKED, none waiting for
another, and a mail whose owner changed (its lease ran out while it was paused) is no longer
its to mark or to record.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from newsletter.database.backend import Backend, naming
from newsletter.database.records import now

LOST = "the worker stopped while this mail was being uploaded: it may have arrived"


class MailKind(StrEnum):
    CONFIRM = "confirm"  # a signup's double opt-in
    WELCOME = "welcome"  # after the confirmation, when [signup] welcome is on
    CHANGE = "change"  # the new address of a change on the preference page


class MailState(StrEnum):
    DUE = "due"
    CLAIMED = "claimed"
    SENDING = "sending"
    SENT = "sent"
    REJECTED = "rejected"
    FAILED = "failed"
    UNKNOWN = "unknown"


FINAL = frozenset({MailState.SENT, MailState.REJECTED, MailState.FAILED, MailState.UNKNOWN})


@dataclass(frozen=True)
class SiteMail:
    id: int
    kind: MailKind
    list: str
    recipient: str  # the envelope address
    address_key: str
    nonce: str  # what the mail's link carries (confirm: the subscriber's; change: its own)
    detail: str  # change: the old address key
    state: MailState
    attempts: int
    created_at: str
    smtp_code: int | None
    smtp_reply: str
    sent_at: str | None


_COLUMNS = (
    "id, kind, list, recipient, address_key, nonce, detail, state, attempts, created_at,"
    " smtp_code, smtp_reply, sent_at"
)


def _mail(row: Sequence[object]) -> SiteMail:
    values = list(row)
    values[1] = MailKind(str(values[1]))
    values[7] = MailState(str(values[7]))
    return SiteMail(*values)  # type: ignore[arg-type]


class SiteMailQueue:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def queue(
        self,
        kind: MailKind,
        list_name: str,
        recipient: str,
        key: str,
        *,
        nonce: str = "",
        detail: str = "",
    ) -> int:
        """A mail due now (by the database's clock); its id. Inside the caller's transaction
        when it goes with other writes (a signup's)."""
        stamp = now()
        with self.backend.transaction():
            rows = self.backend.fetch(
                "INSERT INTO site_mail (kind, list, recipient, address_key, nonce, detail,"
                f" due_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, {self.backend.clock},"
                " ?, ?) RETURNING id",
                (kind.value, list_name, recipient, key, nonce, detail, stamp, stamp),
            )
        return int(rows[0][0])

    def claim(self, owner: str, limit: int, lease: float) -> list[SiteMail]:
        """Up to `limit` due mails, oldest first, now `owner`'s for `lease` seconds."""
        db = self.backend
        with db.transaction():
            rows = db.fetch(
                f"UPDATE site_mail SET state = 'claimed', owner = ?, lease_until = {db.clock} + ?,"
                " updated_at = ? WHERE id IN (SELECT id FROM site_mail WHERE state = 'due'"
                f" AND due_at <= {db.clock} ORDER BY due_at, id LIMIT ? {db.skip_locked})"
                f" RETURNING {_COLUMNS}",
                (owner, lease, now(), limit),
            )
        return sorted((_mail(r) for r in rows), key=lambda m: m.id)

    def mark_sending(self, mail_id: int, owner: str) -> bool:
        """The server is ready for the body: from now the mail is in doubt until its reply.
        False when the mail is no longer `owner`'s (its claim expired): send no body."""
        with self.backend.transaction():
            marked = self.backend.run(
                "UPDATE site_mail SET state = 'sending', updated_at = ?"
                " WHERE id = ? AND owner = ? AND state = 'claimed'",
                (now(), mail_id, owner),
            )
        return marked == 1

    def record(
        self,
        mail_id: int,
        owner: str,
        state: MailState,
        code: int | None,
        reply: str,
        *,
        retry_in: float = 0.0,
    ) -> bool:
        """The mail's outcome, once: `state` (DUE: try again in `retry_in` seconds); each
        outcome counts an attempt. False when the mail is no longer `owner`'s (its claim ran
        out: what was recorded stands)."""
        stamp = now()
        db = self.backend
        with db.transaction():
            recorded = db.run(
                "UPDATE site_mail SET state = ?, smtp_code = ?, smtp_reply = ?, owner = NULL,"
                f" lease_until = NULL, due_at = {db.clock} + ?, updated_at = ?,"
                " attempts = attempts + 1,"
                " sent_at = CASE WHEN ? THEN ? ELSE sent_at END"
                " WHERE id = ? AND owner = ? AND state IN ('claimed', 'sending')",
                (
                    state.value,
                    code,
                    reply[:1000],
                    retry_in,
                    stamp,
                    state is MailState.SENT,
                    stamp,
                    mail_id,
                    owner,
                ),
            )
        return recorded == 1

    def release(self, owner: str) -> int:
        """The mails `owner` claimed and never started, due again (a worker stopping, or a
        server it cannot reach)."""
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE site_mail SET state = 'due', owner = NULL, lease_until = NULL,"
                " updated_at = ? WHERE owner = ? AND state = 'claimed'",
                (now(), owner),
            )

    def renew(self, owner: str, lease: float) -> int:
        db = self.backend
        with db.transaction():
            return db.run(
                f"UPDATE site_mail SET lease_until = {db.clock} + ? WHERE owner = ?"
                " AND state IN ('claimed', 'sending')",
                (lease, owner),
            )

    def reap(self, *, keep: str | None = None, everyone: bool = False) -> list[SiteMail]:
        """End the claims that ran out (with `everyone`, every claim but `keep`'s: the one
        worker SQLite allows knows the others are dead): claimed mail is due again, mail that
        was being uploaded becomes `unknown`. The unknown ones, for the log."""
        db = self.backend
        expired = "owner <> ?" if everyone else f"owner <> ? AND lease_until < {db.clock}"
        stamp = now()
        with db.transaction():
            db.run(
                "UPDATE site_mail SET state = 'due', owner = NULL, lease_until = NULL,"
                f" updated_at = ? WHERE state = 'claimed' AND {expired}",
                (stamp, keep or ""),
            )
            rows = db.fetch(
                "UPDATE site_mail SET state = 'unknown', smtp_reply = ?, owner = NULL,"
                f" lease_until = NULL, updated_at = ? WHERE state = 'sending' AND {expired}"
                f" RETURNING {_COLUMNS}",
                (LOST, stamp, keep or ""),
            )
        return [_mail(r) for r in rows]

    def next_due(self) -> float | None:
        """Seconds until the next due mail (0 when one is due now), None when none waits."""
        db = self.backend
        rows = db.fetch(f"SELECT min(due_at) - {db.clock} FROM site_mail WHERE state = 'due'")
        value = rows[0][0] if rows else None
        return None if value is None else max(0.0, float(value))

    def get(self, mail_id: int) -> SiteMail | None:
        rows = self.backend.fetch(f"SELECT {_COLUMNS} FROM site_mail WHERE id = ?", (mail_id,))
        return _mail(rows[0]) if rows else None

    def of(self, key: str) -> list[SiteMail]:
        """Every site mail to the person at `key` (as recipient, or as the old address of a
        change), oldest first."""
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM site_mail WHERE address_key = ?"
            " OR (kind = 'change' AND detail = ?) ORDER BY id",
            (key, key),
        )
        return [_mail(r) for r in rows]

    def counts(self) -> dict[MailState, int]:
        found = dict(self.backend.fetch("SELECT state, count(*) FROM site_mail GROUP BY state"))
        return {state: int(found.get(state.value, 0)) for state in MailState}

    def use_change(self, key: str, old_key: str, nonce: str) -> bool:
        """The change mail to `key` from `old_key` whose link carries `nonce`, its nonce used
        up: True once, for the first click (a change link must not move the address again
        after the reader came back to the old one); False for any other."""
        if not nonce:
            return False
        with self.backend.transaction():
            return (
                self.backend.run(
                    "UPDATE site_mail SET nonce = '', updated_at = ? WHERE kind = ?"
                    " AND address_key = ? AND detail = ? AND nonce = ?",
                    (now(), MailKind.CHANGE.value, key, old_key, nonce),
                )
                > 0
            )

    def clear_replies(self, before: float) -> int:
        """The server's reply of the mail done with (sent, rejected, failed) and last changed
        before `before` (Unix seconds) cleared: it often names the recipient. How many."""
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(before))
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE site_mail SET smtp_reply = '' WHERE updated_at < ? AND smtp_reply <> ''"
                " AND state IN (?, ?, ?)",
                (cutoff, MailState.SENT.value, MailState.REJECTED.value, MailState.FAILED.value),
            )

    def erase(self, key: str) -> int:
        """The person's site mail deleted, sent or not (a worker uploading one of them then
        finds nothing to record)."""
        with self.backend.transaction():
            erased = self.backend.run(
                "DELETE FROM site_mail WHERE address_key = ? OR (kind = 'change' AND detail = ?)",
                (key, key),
            )
            # Another mail's reply that names them keeps no text.
            others = naming(self.backend, "site_mail", "smtp_reply", key)
            self.backend.many("UPDATE site_mail SET smtp_reply = '' WHERE id = ?", others)
            return erased
