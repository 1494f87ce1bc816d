"""The delivery log's one interface: (issue, list, recipient) rows and suppressions in, states out.

One row per (issue, list, recipient) under a UNIQUE key, so planning the same list twice adds only
new recipients. A row moves pending -> sending -> sent | deferred | rejected | failed; `sending` is
committed after the server accepted RCPT and before DATA, and each outcome is committed as soon as
the server answers, so a crash leaves only the messages being uploaded in doubt, and `recover`
turns them into `unknown` on the next start.

The `suppressions` table is written by the one-click unsubscribe endpoint and read by the sender:
a suppressed address is never sent to again (its row becomes `skipped`).

`Outbox(target)` opens the backend the target names: a Path is a SQLite file (sqlite.py), a
`postgresql://` URL a PostgreSQL database (postgres.py). The SQL here is written once for both
(`?` placeholders, ON CONFLICT); a backend supplies the connection, the transactions and the lock
that serialises writers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus
from newsletter.outbox import schema
from newsletter.outbox.records import (
    COLUMNS,
    DEPARTED,
    DUE,
    IN_DOUBT,
    UNSUBSCRIBED,
    Delivery,
    PlanResult,
    Suppression,
    delivery,
    normalize,
    now,
)

S = DeliveryStatus
Params = Sequence[Any]

_MARK = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ?,"
    " message_id = coalesce(message_id, ?) WHERE id = ?"
)
_MARK_KNOWN = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?"
)
_RECORD = (
    "UPDATE deliveries SET state = ?, smtp_code = ?, smtp_reply = ?, updated_at = ?,"
    " next_attempt_at = ?, attempts = attempts + ?, owner = NULL,"
    " sent_at = CASE WHEN ? THEN ? ELSE sent_at END WHERE id = ?"
)
_SENDING = S.SENDING.value


def is_postgres(target: Path | str) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


class Outbox:
    """The delivery log at `target`: a SQLite file Path or a PostgreSQL URL."""

    backend = ""
    target: Path | str
    # The SQLite file (what worker processes reopen); a PostgreSQL outbox has none.
    path: Path

    def __new__(cls, target: Path | str) -> Outbox:
        if cls is not Outbox:
            return super().__new__(cls)
        # Each backend is imported only when used: SQLite users never load psycopg.
        if is_postgres(target):
            from newsletter.outbox.postgres import PostgresOutbox

            return super().__new__(PostgresOutbox)
        from newsletter.outbox.sqlite import SqliteOutbox

        return super().__new__(SqliteOutbox)

    # -- what a backend supplies (sqlite.py, postgres.py) ----------------------------------

    def close(self) -> None:
        raise NotImplementedError

    def _run(self, sql: str, params: Params = ()) -> int:
        """Execute one statement (committed at once outside `_write`); its row count."""
        raise NotImplementedError

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[None]:
        """A transaction holding the write lock from its start, so two senders never
        interleave a read-then-write on the same rows."""
        raise NotImplementedError

    def _migration_lock(self) -> AbstractContextManager[None]:
        """A transaction during which no other process applies migrations."""
        raise NotImplementedError

    def _script(self, migration: schema.Migration) -> str:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Outbox:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def version(self) -> int:
        """The schema version the database is at (0: an empty database)."""
        self._run(schema.TRACKING[self.backend])
        (found,) = self._fetch("SELECT coalesce(max(version), 0) FROM schema_migrations")[0]
        return int(found)

    def migrate(self) -> list[schema.Migration]:
        """Apply every migration the database lacks, each in its own transaction; the ones
        applied. Refuses a database written by a newer version of newsletter."""
        applied = []
        with self._migration_lock():
            current = self.version()
            if current > schema.LATEST:
                raise DeliveryError(
                    f"{self.display}: the outbox schema is at version {current}, newer than"
                    f" this newsletter knows ({schema.LATEST})",
                    hint="Upgrade newsletter on this machine to the version the others run.",
                )
            for migration in schema.MIGRATIONS:
                if migration.version <= current:
                    continue
                for statement in schema.statements(self._script(migration)):
                    self._run(statement)
                self._run(
                    "INSERT INTO schema_migrations (version, about, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.about, now()),
                )
                applied.append(migration)
        return applied

    @property
    def display(self) -> str:
        """Where the outbox is, safe to print (never a password)."""
        return str(self.target)

    # -- planning ---------------------------------------------------------------------------

    def plan(
        self,
        issue: int,
        list_name: str,
        recipients: Iterable[str],
        message_ids: Mapping[str, str] | None = None,
    ) -> PlanResult:
        """Snapshot the list: a `pending` row for every new recipient; rows still waiting to be
        sent whose recipient left the list or is suppressed become `skipped`.

        `message_ids` (normalised recipient -> Message-ID) gives each waiting row without one its
        Message-ID now, in one transaction, rather than in the commit before its DATA: setting
        it there updated the UNIQUE index on a random page, one more page per message."""
        wanted = {normalize(r) for r in recipients}
        ids = {normalize(r): m for r, m in message_ids.items()} if message_ids else {}
        suppressed = self.suppressed(list_name)
        stamp = now()
        with self._write():
            before = self._count(issue, list_name)
            self._many(
                "INSERT INTO deliveries (issue, list, recipient, envelope, message_id,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                ((issue, list_name, r, r, None, stamp, stamp) for r in sorted(wanted)),
            )
            added = self._count(issue, list_name) - before
            waiting = self._fetch(
                "SELECT id, recipient, message_id FROM deliveries WHERE issue = ? AND list = ?"
                " AND state IN (?, ?)",
                (issue, list_name, *DUE),
            )
            # An ID some other row already holds stays that row's (and this one gets its own
            # at its first attempt, as without `message_ids`).
            self._many(
                "UPDATE deliveries SET message_id = ? WHERE id = ? AND message_id IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM deliveries WHERE message_id = ?)",
                (
                    (ids[recipient], row_id, ids[recipient])
                    for row_id, recipient, message_id in waiting
                    if message_id is None and recipient in ids
                ),
            )
            skipped = 0
            for row_id, recipient, _ in waiting:
                reason = (
                    UNSUBSCRIBED
                    if recipient in suppressed
                    else DEPARTED
                    if recipient not in wanted
                    else None
                )
                if reason:
                    skipped += 1
                    self._run(
                        "UPDATE deliveries SET state = ?, smtp_reply = ?, updated_at = ?"
                        " WHERE id = ?",
                        (S.SKIPPED.value, reason, stamp, row_id),
                    )
            total = self._count(issue, list_name)
        return PlanResult(added=added, skipped=skipped, total=total)

    def _count(self, issue: int, list_name: str) -> int:
        (n,) = self._fetch(
            "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ?", (issue, list_name)
        )[0]
        return int(n)

    def recover(self, issue: int, list_name: str) -> list[Delivery]:
        """Rows a crashed run left in `sending` become `unknown`: their upload may have been
        accepted. Returns them (as they are now) so the caller can report them."""
        with self._write():
            rows = self._fetch(
                "UPDATE deliveries SET state = ?, updated_at = ?, smtp_reply = ?, owner = NULL"  # noqa: S608
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
                "UPDATE deliveries SET state = ?, next_attempt_at = 0, updated_at = ?"  # noqa: S608
                f" WHERE issue = ? AND list = ? AND state IN ({marks})",
                (S.PENDING.value, now(), issue, list_name, *chosen),
            )

    def due(self, issue: int, list_name: str) -> list[Delivery]:
        """Rows this run should attempt (pending and deferred), oldest first."""
        return self.rows(issue, list_name, DUE)

    # -- one delivery -----------------------------------------------------------------------

    def mark_sending(self, row_id: int, message_id: str | None) -> None:
        """Committed after RCPT was accepted and before DATA: the start of the in-doubt window.
        The first Message-ID stored stays the row's for every later attempt; None says the row
        holds it already (planned with it), which keeps its index out of this commit."""
        if message_id is None:
            self._run(_MARK_KNOWN, (_SENDING, now(), row_id))
        else:
            self._run(_MARK, (_SENDING, now(), message_id, row_id))

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
        """Record an outcome, committed at once: a message the server took is `sent` on disk
        before the next one starts. `attempted` counts an attempt that never reached `sending`
        (refused at MAIL or RCPT). The row is free to claim again (if it is due)."""
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
        self._run(_RECORD, params)

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
                f"SELECT {COLUMNS} FROM deliveries WHERE issue = ? AND list = ?"  # noqa: S608
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
            f"SELECT issue, min(sent_at) FROM deliveries WHERE state = ? AND list IN ({marks})"  # noqa: S608
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
        """Never send to `address` on `list_name` again. True if it was not suppressed yet."""
        with self._write():
            return (
                self._run(
                    "INSERT INTO suppressions (list, address, source, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (list_name, normalize(address), source, now()),
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
            f"SELECT list, address, source, created_at FROM suppressions {where}"  # noqa: S608
            " ORDER BY created_at, list, address",
            params,
        )
        return [Suppression(*r) for r in rows]
