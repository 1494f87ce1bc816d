"""The delivery log's one interface: (issue, list, recipient) rows and suppressions in, states out.

One row per (issue, list, recipient) under a UNIQUE key, so planning the same list twice adds only
new recipients. A row moves pending -> sending -> sent | deferred | rejected | failed; `sending` is
committed once the server answered DATA with 354, and each outcome as soon as the server answers
(or, `held`, with the next mark: before any other body goes out), so a crash leaves only the
messages being uploaded in doubt, and `recover` (or, with several workers, `reap`) turns them
into `unknown`.

The `suppressions` table is written by the one-click unsubscribe endpoint and read by the sender:
a suppressed address is never sent to again (its row becomes `skipped`).

`open_outbox(target)` (in __init__) opens the backend the target names: a Path is a SQLite file
(sqlite.py), a `postgresql://` URL a PostgreSQL database (postgres.py). Planning, claims and
leases are in runs.py, what a backend supplies in store.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import islice

from newsletter.models import DeliveryStatus
from newsletter.outbox.backend import StoreBackend
from newsletter.outbox.bounces import BounceLog
from newsletter.outbox.clicks import Clicks
from newsletter.outbox.records import (
    COLUMNS,
    DUE,
    EDITOR_SOURCE,
    IN_DOUBT,
    Delivery,
    PlanResult,
    Suppression,
    delivery,
    now,
)
from newsletter.outbox.runs import Planned, Runs
from newsletter.outbox.sendfigures import SendFigures
from newsletter.outbox.sentlinks import SentLinks
from newsletter.subscribers import normalize

S = DeliveryStatus

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
_SENDING = S.SENDING.value


class Outbox(Runs, BounceLog):
    """The delivery log at `target`: a SQLite file Path or a PostgreSQL URL."""

    # The stores of what readers read, each over this outbox's connection (outbox/backend.py).
    @property
    def clicks(self) -> Clicks:
        return Clicks(StoreBackend(self))

    @property
    def sent_links(self) -> SentLinks:
        return SentLinks(StoreBackend(self))

    @property
    def send_figures(self) -> SendFigures:
        return SendFigures(StoreBackend(self))

    def plan(
        self,
        issue: int,
        list_name: str,
        recipients: Iterable[str],
        message_ids: Mapping[str, str] | None = None,
        *,
        planner: str = "",
    ) -> PlanResult:
        """Plan a list of plain addresses in one go (the streaming steps of runs.py, for
        callers that hold a small list): a `pending` row for every new recipient; waiting rows
        whose recipient left the list or is suppressed become `skipped`. `message_ids`
        (recipient -> Message-ID) gives each new or waiting row without one its ID."""
        ids = {normalize(r): m for r, m in message_ids.items()} if message_ids else {}
        start = self.start_plan(issue, list_name, planner)
        keys = iter(dict.fromkeys(normalize(r) for r in recipients))
        while batch := list(islice(keys, 5000)):
            self.add(
                issue, list_name, start.generation, [Planned(k, k, "", ids.get(k)) for k in batch]
            )
        return self.finish_plan(issue, list_name, start)

    def recover(self, issue: int, list_name: str, *, keep: str = "") -> list[Delivery]:
        """Rows a crashed run left in `sending` become `unknown`: their upload may have been
        accepted. Returns them (as they are now) so the caller can report them. Every claim
        and worker of the send ends too: only for a caller that knows no other worker runs
        (the SQLite send lock); with several workers, `reap` ends only expired leases.
        `keep` is the caller's own worker, registered already."""
        with self._write():
            self._run(
                "UPDATE deliveries SET owner = NULL WHERE issue = ? AND list = ?"
                " AND owner IS NOT NULL AND state <> ?",
                (issue, list_name, _SENDING),
            )
            self._run(
                "UPDATE workers SET state = 'dead' WHERE issue = ? AND list = ?"
                " AND state = 'active' AND id <> ?",
                (issue, list_name, keep),
            )
            rows = self._fetch(
                "UPDATE deliveries SET state = ?, updated_at = ?, smtp_reply = ?, owner = NULL"
                f" WHERE issue = ? AND list = ? AND state = ? RETURNING {COLUMNS}",
                (S.UNKNOWN.value, now(), IN_DOUBT, issue, list_name, _SENDING),
            )
        return sorted((delivery(r) for r in rows), key=lambda d: d.id)

    def reopen(self, issue: int, list_name: str, states: Iterable[DeliveryStatus]) -> int:
        """Make rows in `states` (unknown, failed) due again; their Message-ID is kept."""
        chosen = [str(s) for s in states]
        if not chosen:
            return 0
        marks = ",".join("?" * len(chosen))
        with self._write():
            return self._run(
                "UPDATE deliveries SET state = ?, next_attempt_at = 0, tries = 0, updated_at = ?"
                f" WHERE issue = ? AND list = ? AND state IN ({marks})",
                (S.PENDING.value, now(), issue, list_name, *chosen),
            )

    def due(self, issue: int, list_name: str) -> list[Delivery]:
        """Rows this run should attempt (pending and deferred), oldest first."""
        return self.rows(issue, list_name, DUE)

    # -- one delivery -----------------------------------------------------------------------

    def mark_sending(self, row_id: int, message_id: str | None, owner: str | None = None) -> bool:
        """Committed once the server answered DATA with 354: the start of the in-doubt window.
        The first Message-ID stored stays the row's for every later attempt; None says the row
        holds it already (planned with it), which keeps its index out of this commit.

        With `owner`, only while that worker still holds the row: False means its lease was
        reaped and the row may be another worker's now, so the body must not be sent."""
        sql, params = (
            (_MARK_KNOWN, [_SENDING, now(), row_id])
            if message_id is None
            else (_MARK, [_SENDING, now(), message_id, row_id])
        )
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        return self._run(sql, params) == 1

    def record(
        self,
        row_id: int,
        state: DeliveryStatus,
        *,
        code: int | None = None,
        reply: str = "",
        next_attempt_at: float = 0.0,
        attempted: bool = False,
        owner: str | None = None,
        held: bool = False,
    ) -> bool:
        """Record an outcome, committed at once: a message the server took is `sent` on disk
        before the next one starts. `attempted` counts an attempt that never reached `sending`
        (refused at MAIL or RCPT). The row is free to claim again (if it is due).

        `held`: the commit may wait for the next `sending` mark or `release()` (the caller
        releases before any other body goes out, and soon): a crash meanwhile leaves the row
        `sending`, so it is reported `unknown`, as a crash just before the commit would.

        With `owner`, only while that worker still holds the row: False means its lease was
        reaped, and the row (sent or `unknown` by now, or claimed by another worker) is left
        as it is."""
        stamp = now()
        params = (
            state.value,  # a plain str binds faster than the StrEnum
            code,
            reply,
            stamp,
            next_attempt_at,
            1 if attempted else 0,
            state == S.SENT,
            stamp,
            row_id,
        )
        run = self._run_held if held else self._run
        if owner is None:
            return run(_RECORD, params) == 1
        return run(_RECORD + " AND owner = ?", (*params, owner)) == 1

    # -- reading ----------------------------------------------------------------------------

    def counts(self, issue: int, list_name: str) -> dict[DeliveryStatus, int]:
        counts = dict.fromkeys(DeliveryStatus, 0)
        for state, n in self._fetch(
            "SELECT state, count(*) FROM deliveries WHERE issue = ? AND list = ? GROUP BY state",
            (issue, list_name),
        ):
            counts[DeliveryStatus(state)] = int(n)
        return counts

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
            found = self._fetch(
                f"SELECT {COLUMNS} FROM deliveries WHERE issue = ? AND list = ?"
                f" AND state IN ({marks}) AND id > ? ORDER BY id LIMIT ?",
                (issue, list_name, *chosen, after, batch),
            )
            yield from (delivery(r) for r in found)
            if len(found) < batch:
                return
            after = found[-1][0]

    def first_sent(self, lists: Iterable[str]) -> dict[int, str]:
        """When each issue was first sent to one of `lists`: the time of its earliest `sent` row
        (the date the web archive shows for an issue file without one)."""
        chosen = list(lists)
        if not chosen:
            return {}
        marks = ",".join("?" * len(chosen))
        rows = self._fetch(
            f"SELECT issue, min(sent_at) FROM deliveries WHERE state = ? AND list IN ({marks})"
            " GROUP BY issue",
            (S.SENT.value, *chosen),
        )
        return {int(issue): sent_at for issue, sent_at in rows if sent_at}

    def lists_of(self, issue: int) -> list[str]:
        """The lists an issue has a delivery log for."""
        return [
            r[0]
            for r in self._fetch(
                "SELECT DISTINCT list FROM deliveries WHERE issue = ? ORDER BY list", (issue,)
            )
        ]

    # -- suppressions -----------------------------------------------------------------------

    def suppress(self, list_name: str, address: str, source: str) -> bool:
        """Never send to `address` on `list_name` again. True if it was not suppressed yet, or
        only by the reader and now by the editor (EDITOR_SOURCE), whose word wins: the reader's
        re-subscribe cannot lift it then."""
        with self._write():
            return (
                self._run(
                    "INSERT INTO suppressions (list, address, source, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (list, address) DO UPDATE"
                    " SET source = excluded.source"
                    " WHERE excluded.source = ? AND suppressions.source <> ?",
                    (list_name, normalize(address), source, now(), EDITOR_SOURCE, EDITOR_SOURCE),
                )
                == 1
            )

    def is_suppressed(self, list_name: str, address: str) -> bool:
        return bool(
            self._fetch(
                "SELECT 1 FROM suppressions WHERE list = ? AND address = ?",
                (list_name, normalize(address)),
            )
        )

    def suppressed(self, list_name: str) -> frozenset[str]:
        return frozenset(
            r[0]
            for r in self._fetch("SELECT address FROM suppressions WHERE list = ?", (list_name,))
        )

    def unsuppress(
        self, list_name: str, address: str, *, sources: Iterable[str] | None = None
    ) -> bool:
        """Send to `address` again (a re-subscribe). With `sources`, only a suppression recorded
        by one of them is lifted. True if one was."""
        query = "DELETE FROM suppressions WHERE list = ? AND address = ?"
        params: list[str] = [list_name, normalize(address)]
        if sources is not None:
            chosen = list(sources)
            if not chosen:
                return False
            query += f" AND source IN ({','.join('?' * len(chosen))})"
            params += chosen
        with self._write():
            return self._run(query, params) == 1

    def suppression(self, list_name: str, address: str) -> Suppression | None:
        """The suppression of `address` on `list_name` (when, and who asked), or None."""
        found = self._fetch(
            "SELECT list, address, source, created_at FROM suppressions"
            " WHERE list = ? AND address = ?",
            (list_name, normalize(address)),
        )
        return Suppression(*found[0]) if found else None

    def suppressions(self, list_name: str | None = None) -> list[Suppression]:
        """Every suppression (of one list), oldest first, with when and how it was recorded."""
        where, params = ("WHERE list = ?", (list_name,)) if list_name is not None else ("", ())
        rows = self._fetch(
            f"SELECT list, address, source, created_at FROM suppressions {where}"
            " ORDER BY created_at, list, address",
            params,
        )
        return [Suppression(*r) for r in rows]
