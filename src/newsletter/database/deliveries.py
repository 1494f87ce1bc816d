"""The delivery log's rows: (issue, list) in; rows, counts and the rows a crash left in doubt out.

One row per (issue, list, recipient) under a UNIQUE key, so planning the same list twice adds only
new recipients. A row moves pending -> sending -> sent | deferred | rejected | failed | unknown;
what a send writes on the way (the `sending` mark and each outcome) goes through the journal
(journal.py), which says when each becomes durable. A crash leaves only the uploads in flight in
`sending`: `recover` (one machine) or a lease's reaping (leases.py) turns them into `unknown`.
A new test of a staging list (testsends.py) `restart`s every row of its send.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence

from newsletter.database.backend import Backend, naming
from newsletter.database.records import COLUMNS, IN_DOUBT, Delivery, delivery_from_row, now
from newsletter.models import DeliveryStatus

S = DeliveryStatus
_SENDING = S.SENDING.value
FORGOTTEN_REPLY = "forgotten: erased on request"
FORGOTTEN = "forgotten:"  # how an erased person's rows' recipient begins (never an address)
# The rows of a send that may still go out; `sending` is left to the run that holds it.
_WAITING = "('pending', 'deferred', 'unknown', 'failed')"


class Deliveries:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def recover(self, issue: int, list_name: str, *, keep: str = "") -> list[Delivery]:
        """Rows a crashed run left in `sending` become `unknown`: their upload may have been
        accepted. Returns them (as they are now) so the caller can report them. Every claim
        and worker of the send ends too: only for a caller that knows no other worker runs
        (the SQLite send lock); with several workers, a lease's reaping ends only expired ones.
        `keep` is the caller's own worker, registered already."""
        db = self.backend
        with db.transaction():
            db.run(
                "UPDATE deliveries SET owner = NULL WHERE issue = ? AND list = ?"
                " AND owner IS NOT NULL AND state <> ?",
                (issue, list_name, _SENDING),
            )
            db.run(
                "UPDATE workers SET state = 'dead' WHERE issue = ? AND list = ?"
                " AND state = 'active' AND id <> ?",
                (issue, list_name, keep),
            )
            rows = db.fetch(
                "UPDATE deliveries SET state = ?, updated_at = ?, smtp_reply = ?, owner = NULL"
                f" WHERE issue = ? AND list = ? AND state = ? RETURNING {COLUMNS}",
                (S.UNKNOWN.value, now(), IN_DOUBT, issue, list_name, _SENDING),
            )
        return sorted((delivery_from_row(r) for r in rows), key=lambda d: d.id)

    def reopen(self, issue: int, list_name: str, states: Iterable[DeliveryStatus]) -> int:
        """Make rows in `states` (unknown, failed) due again; their Message-ID is kept."""
        chosen = [str(s) for s in states]
        if not chosen:
            return 0
        marks = ",".join("?" * len(chosen))
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE deliveries SET state = ?, next_attempt_at = 0, tries = 0, updated_at = ?"
                f" WHERE issue = ? AND list = ? AND state IN ({marks})",
                (S.PENDING.value, now(), issue, list_name, *chosen),
            )

    def restart(self, issue: int, list_name: str) -> int:
        """Every row of the send `pending` again, for a new test of a staging list: attempts,
        replies and times cleared, and the Message-ID too, so planning stores the new test's
        own. The rows stay (a late bounce of an earlier test still names its row)."""
        return self.backend.run(
            "UPDATE deliveries SET state = ?, message_id = NULL, attempts = 0, tries = 0,"
            " smtp_code = NULL, smtp_reply = '', sent_at = NULL, next_attempt_at = 0,"
            " owner = NULL, updated_at = ? WHERE issue = ? AND list = ?",
            (S.PENDING.value, now(), issue, list_name),
        )

    def counts(self, issue: int, list_name: str) -> dict[DeliveryStatus, int]:
        counts = dict.fromkeys(DeliveryStatus, 0)
        for state, n in self.backend.fetch(
            "SELECT state, count(*) FROM deliveries WHERE issue = ? AND list = ? GROUP BY state",
            (issue, list_name),
        ):
            counts[DeliveryStatus(state)] = int(n)
        return counts

    def first_sending(self) -> str | None:
        """When the log's first message went out (any issue, any list); None: none yet."""
        (found,) = self.backend.fetch("SELECT min(sent_at) FROM deliveries WHERE state = 'sent'")
        return None if found[0] is None else str(found[0])

    def sent_between(self, begin: str, end: str) -> int:
        """Messages sent from `begin` up to `end` (sent_at stamps), any issue, any list."""
        (found,) = self.backend.fetch(
            "SELECT count(*) FROM deliveries WHERE state = 'sent' AND sent_at >= ? AND sent_at < ?",
            (begin, end),
        )
        return int(found[0])

    def by_relay(self, issue: int, list_name: str) -> dict[str, dict[DeliveryStatus, int]]:
        """Each relay's rows by state (only rows a relay answered for), relays by name."""
        found: dict[str, dict[DeliveryStatus, int]] = {}
        for relay, state, n in self.backend.fetch(
            "SELECT relay, state, count(*) FROM deliveries WHERE issue = ? AND list = ?"
            " AND relay IS NOT NULL GROUP BY relay, state ORDER BY relay, state",
            (issue, list_name),
        ):
            found.setdefault(relay, {})[DeliveryStatus(state)] = int(n)
        return found

    def rows(
        self, issue: int, list_name: str, states: Iterable[DeliveryStatus] | None = None
    ) -> list[Delivery]:
        return list(self.iter_rows(issue, list_name, states))

    def iter_rows(
        self,
        issue: int,
        list_name: str,
        states: Iterable[DeliveryStatus] | None = None,
        *,
        batch: int = 5000,
    ) -> Iterator[Delivery]:
        """Rows in id order, read `batch` at a time (a million-row log is never held)."""
        chosen = [str(s) for s in (states if states is not None else DeliveryStatus)]
        marks = ",".join("?" * len(chosen))
        after = -1
        while True:
            found = self.backend.fetch(
                f"SELECT {COLUMNS} FROM deliveries WHERE issue = ? AND list = ?"
                f" AND state IN ({marks}) AND id > ? ORDER BY id LIMIT ?",
                (issue, list_name, *chosen, after, batch),
            )
            yield from (delivery_from_row(r) for r in found)
            if len(found) < batch:
                return
            after = found[-1][0]

    def by_id(self, ids: Iterable[int]) -> list[Delivery]:
        return [r for i in sorted(set(ids)) for r in self._where("id = ?", (i,))]

    def by_message_id(self, message_ids: Sequence[str]) -> list[Delivery]:
        """The rows holding any of `message_ids`, in one query (Message-IDs have no index:
        each query reads the table once, so the caller bounds how many it asks about)."""
        wanted = list(dict.fromkeys(message_ids))
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        return self._where(f"message_id IN ({marks})", tuple(wanted))

    def first_sent(self, lists: Iterable[str]) -> dict[int, str]:
        """When each issue was first sent to one of `lists`: the time of its earliest `sent` row
        (the date the web archive shows for an issue file without one)."""
        chosen = list(lists)
        if not chosen:
            return {}
        marks = ",".join("?" * len(chosen))
        rows = self.backend.fetch(
            f"SELECT issue, min(sent_at) FROM deliveries WHERE state = ? AND list IN ({marks})"
            " GROUP BY issue",
            (S.SENT.value, *chosen),
        )
        return {int(issue): sent_at for issue, sent_at in rows if sent_at}

    def lists_of(self, issue: int) -> list[str]:
        """The lists an issue has a delivery log for."""
        return [
            r[0]
            for r in self.backend.fetch(
                "SELECT DISTINCT list FROM deliveries WHERE issue = ? ORDER BY list", (issue,)
            )
        ]

    def of_recipient(self, key: str) -> list[tuple[int, str, str, str | None, str]]:
        """(issue, list, state, sent_at, updated_at) of every row of the address `key`."""
        rows = self.backend.fetch(
            "SELECT issue, list, state, sent_at, updated_at FROM deliveries WHERE recipient = ?"
            " ORDER BY issue, list",
            (key,),
        )
        return [(int(i), str(li), str(st), s, str(u)) for i, li, st, s, u in rows]

    def forget(self, key: str, digest: str) -> int:
        """The rows of the address `key` kept without it, the name or the server's reply (GDPR
        Art. 17: the recipient becomes `forgotten:DIGEST:ROW`, unique as the key was, and the
        reply FORGOTTEN_REPLY: a relay's `550 <ann@...>: unknown user` names them), so every
        send's counts still add up; rows that could still go out become `skipped`. How many."""
        marker = f"{FORGOTTEN}{digest[:16]}:"
        stamp = now()
        with self.backend.transaction():
            self.backend.run(
                "UPDATE deliveries SET state = 'skipped', smtp_code = NULL, smtp_reply = ?,"
                f" owner = NULL, updated_at = ? WHERE recipient = ? AND state IN {_WAITING}",
                (FORGOTTEN_REPLY, stamp, key),
            )
            scrubbed = self.backend.run(
                "UPDATE deliveries SET recipient = ? || CAST(id AS TEXT), envelope = '', name = '',"
                " smtp_reply = ?, updated_at = ? WHERE recipient = ?",
                (marker, FORGOTTEN_REPLY, stamp, key),
            )
            # Another row's reply that names them (a relay quoting a forward, an alias): the
            # text goes too. A scan of the log's replies, once per erasure.
            others = naming(self.backend, "deliveries", "smtp_reply", key)
            self.backend.many(
                "UPDATE deliveries SET smtp_reply = ? WHERE id = ?",
                [(FORGOTTEN_REPLY, i) for (i,) in others],
            )
            return scrubbed

    def clear_replies(self, before: float) -> int:
        """The server's reply of the rows done with (sent, rejected, failed) and last changed
        before `before` (Unix seconds) cleared: a relay's text often names the reader, and the
        state and code stay for the counts. Rows that may still go out, or that wait for the
        editor (unknown), keep theirs. How many."""
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(before))
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE deliveries SET smtp_reply = '' WHERE updated_at < ? AND smtp_reply <> ''"
                " AND state IN (?, ?, ?)",
                (cutoff, S.SENT.value, S.REJECTED.value, S.FAILED.value),
            )

    def _where(self, where: str, params: tuple[object, ...]) -> list[Delivery]:
        found = self.backend.fetch(f"SELECT {COLUMNS} FROM deliveries WHERE {where}", params)
        return [delivery_from_row(r) for r in found]
