"""The delivery log: (issue, list, recipient) rows in SQLite in, per-recipient states out.

One row per (issue, list, recipient) under a UNIQUE key, so planning the same list twice adds only
new recipients. A row moves pending -> sending -> sent | deferred | rejected | failed; `sending` is
committed after the server accepted RCPT and before DATA, and each outcome is committed as soon as
the server answers, so a crash leaves only the messages being uploaded in doubt, and `recover`
turns them into `unknown` on the next start.

The `suppressions` table is written by the one-click unsubscribe endpoint and read by the sender:
a suppressed address is never sent to again (its row becomes `skipped`).

WAL with synchronous=NORMAL: every commit survives a killed process (the case that matters for a
send someone interrupts); only a power loss may drop the last few commits.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus
from newsletter.subscribers import normalize

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id              INTEGER PRIMARY KEY,
    issue           INTEGER NOT NULL,
    list            TEXT    NOT NULL,
    recipient       TEXT    NOT NULL,
    message_id      TEXT    UNIQUE,
    state           TEXT    NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    smtp_code       INTEGER,
    smtp_reply      TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    sent_at         TEXT,
    next_attempt_at REAL    NOT NULL DEFAULT 0,
    UNIQUE (issue, list, recipient)
);
-- No index on state: every state change would update it (~40 % of a send's SQLite time), and
-- the UNIQUE key's (issue, list) prefix already narrows every query to one list.
DROP INDEX IF EXISTS deliveries_state;
CREATE TABLE IF NOT EXISTS suppressions (
    list       TEXT NOT NULL,
    address    TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (list, address)
);
"""

# What bounce and complaint reports said about deliveries (see `record_bounce`). Plain SQL that
# SQLite and PostgreSQL both run.
BOUNCES_SCHEMA = """
CREATE TABLE IF NOT EXISTS bounce_reports (
    report      TEXT   NOT NULL,
    delivery_id BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    status      TEXT   NOT NULL DEFAULT '',
    detail      TEXT   NOT NULL DEFAULT '',
    source      TEXT   NOT NULL,
    created_at  TEXT   NOT NULL,
    PRIMARY KEY (report, delivery_id)
);
CREATE INDEX IF NOT EXISTS bounce_reports_delivery ON bounce_reports (delivery_id);
-- A reader's earlier issues, for the soft-bounce streak (planning pays one index insert a row).
CREATE INDEX IF NOT EXISTS deliveries_reader ON deliveries (list, recipient, issue);
"""
# States after which a message may have reached the reader's server, so a bounce can follow.
_WENT_OUT = (DeliveryStatus.SENT, DeliveryStatus.REJECTED, DeliveryStatus.UNKNOWN)
_BOUNCED_KINDS = ("hard", "soft")

S = DeliveryStatus
# States a plain re-run sends (again); the others need a flag or are final.
DUE = (S.PENDING, S.DEFERRED)
IN_DOUBT = "interrupted during DATA: the server may have accepted it"


UNSUBSCRIBED = "unsubscribed"  # the reason on a `skipped` row whose address is suppressed


def now() -> str:
    """The outbox's clock (what it stamps rows with), to compare with the times it stores."""
    return _now()


def _now() -> str:
    """UTC now as ISO 8601 with milliseconds (what datetime.isoformat gives, a third of the
    cost: a send stamps two rows per message)."""
    now = time.time()
    second = int(now)
    if second != _second[0]:
        _second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_second[1]}.{int((now - second) * 1000):03d}+00:00"


_second: list[int | str] = [-1, ""]  # the last whole second and its formatted text


_MARK = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ?,"
    " message_id = coalesce(message_id, ?) WHERE id = ?"
)
_MARK_KNOWN = (
    "UPDATE deliveries SET state = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?"
)
_RECORD = (
    "UPDATE deliveries SET state = ?, smtp_code = ?, smtp_reply = ?, updated_at = ?,"
    " next_attempt_at = ?, attempts = attempts + ?,"
    " sent_at = CASE WHEN ? THEN ? ELSE sent_at END WHERE id = ?"
)


_SENDING = S.SENDING.value


@dataclass(frozen=True)
class Delivery:
    """One row of the delivery log."""

    id: int
    issue: int
    list: str
    recipient: str
    message_id: str | None
    state: DeliveryStatus
    attempts: int
    smtp_code: int | None
    smtp_reply: str
    created_at: str
    updated_at: str
    sent_at: str | None
    next_attempt_at: float


@dataclass(frozen=True)
class Suppression:
    """An address never sent to again on a list: since when, and who asked (`source`)."""

    list: str
    address: str
    source: str
    created_at: str


class Outbox:
    """The SQLite delivery log at `path` (created with its folder on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._db.executescript(SCHEMA + BOUNCES_SCHEMA)
        except sqlite3.Error as exc:
            raise DeliveryError(
                f"{path}: cannot open the delivery log: {exc}",
                hint="Check that the state folder is writable and the file is a newsletter outbox.",
            ) from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so two senders never interleave a
        # read-then-write on the same rows.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- planning ---------------------------------------------------------------------------

    def plan(
        self,
        issue: int,
        list_name: str,
        recipients: Iterable[str],
        message_ids: Mapping[str, str] | None = None,
    ) -> None:
        """Snapshot the list: a `pending` row for every new recipient; rows still waiting to be
        sent whose recipient left the list or is suppressed become `skipped`.

        `message_ids` (normalised recipient -> Message-ID) gives each waiting row without one its
        Message-ID now, in one transaction, rather than in the commit before its DATA: setting
        it there updated the UNIQUE index on a random page, one more page per message."""
        wanted = {normalize(r) for r in recipients}
        ids = {normalize(r): m for r, m in message_ids.items()} if message_ids else {}
        suppressed = self.suppressed(list_name)
        now = _now()
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO deliveries (issue, list, recipient, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                ((issue, list_name, r, now, now) for r in sorted(wanted)),
            )
            waiting = db.execute(
                "SELECT id, recipient, message_id FROM deliveries WHERE issue = ? AND list = ?"
                " AND state IN (?, ?)",
                (issue, list_name, *DUE),
            ).fetchall()
            # OR IGNORE: an ID some other row already holds stays that row's (and this one gets
            # its own at its first attempt, as without `message_ids`).
            db.executemany(
                "UPDATE OR IGNORE deliveries SET message_id = ?"
                " WHERE id = ? AND message_id IS NULL",
                (
                    (ids[row["recipient"]], row["id"])
                    for row in waiting
                    if row["message_id"] is None and row["recipient"] in ids
                ),
            )
            for row in waiting:
                reason = (
                    UNSUBSCRIBED
                    if row["recipient"] in suppressed
                    else "no longer on the list"
                    if row["recipient"] not in wanted
                    else None
                )
                if reason:
                    db.execute(
                        "UPDATE deliveries SET state = ?, smtp_reply = ?, updated_at = ?"
                        " WHERE id = ?",
                        (S.SKIPPED, reason, now, row["id"]),
                    )

    def recover(self, issue: int, list_name: str) -> list[Delivery]:
        """Rows a crashed run left in `sending` become `unknown`: their upload may have been
        accepted. Returns them (as they are now) so the caller can report them."""
        with self._write() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM deliveries WHERE issue = ? AND list = ? AND state = ?",
                    (issue, list_name, S.SENDING),
                )
            ]
            db.executemany(
                "UPDATE deliveries SET state = ?, updated_at = ?, smtp_reply = ? WHERE id = ?",
                ((S.UNKNOWN, _now(), IN_DOUBT, row_id) for row_id in ids),
            )
            rows = [
                _row(db.execute("SELECT * FROM deliveries WHERE id = ?", (i,)).fetchone())
                for i in ids
            ]
        return rows

    def reopen(self, issue: int, list_name: str, states: Iterable[DeliveryStatus]) -> int:
        """Make rows in `states` (unknown, failed) due again; their Message-ID is kept."""
        chosen = [str(s) for s in states]
        if not chosen:
            return 0
        marks = ",".join("?" * len(chosen))
        with self._write() as db:
            cur = db.execute(
                f"UPDATE deliveries SET state = ?, next_attempt_at = 0, updated_at = ?"  # noqa: S608
                f" WHERE issue = ? AND list = ? AND state IN ({marks})",
                (S.PENDING, _now(), issue, list_name, *chosen),
            )
            return cur.rowcount

    def due(self, issue: int, list_name: str) -> list[Delivery]:
        """Rows this run should attempt (pending and deferred), oldest first."""
        rows = self._db.execute(
            "SELECT * FROM deliveries WHERE issue = ? AND list = ? AND state IN (?, ?) ORDER BY id",
            (issue, list_name, *DUE),
        ).fetchall()
        return [_row(r) for r in rows]

    # -- one delivery -----------------------------------------------------------------------

    def mark_sending(self, row_id: int, message_id: str | None) -> None:
        """Committed after RCPT was accepted and before DATA: the start of the in-doubt window.
        The first Message-ID stored stays the row's for every later attempt; None says the row
        holds it already (planned with it), which keeps its index out of this commit."""
        params: tuple[object, ...]
        if message_id is None:
            sql, params = _MARK_KNOWN, (_SENDING, _now(), row_id)
        else:
            sql, params = _MARK, (_SENDING, _now(), message_id, row_id)
        self._db.execute(sql, params)

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
        (refused at MAIL or RCPT)."""
        now = _now()
        params = (
            state.value,  # a plain str binds faster than the StrEnum
            code,
            reply,
            now,
            next_attempt_at,
            1 if attempted else 0,
            state == S.SENT,
            now,
            row_id,
        )
        self._db.execute(_RECORD, params)

    # -- reading ----------------------------------------------------------------------------

    def counts(self, issue: int, list_name: str) -> dict[DeliveryStatus, int]:
        counts = dict.fromkeys(DeliveryStatus, 0)
        for state, n in self._db.execute(
            "SELECT state, count(*) FROM deliveries WHERE issue = ? AND list = ? GROUP BY state",
            (issue, list_name),
        ):
            counts[DeliveryStatus(state)] = n
        return counts

    def rows(
        self, issue: int, list_name: str, states: Iterable[DeliveryStatus] | None = None
    ) -> list[Delivery]:
        chosen = [str(s) for s in (states if states is not None else DeliveryStatus)]
        marks = ",".join("?" * len(chosen))
        rows = self._db.execute(
            f"SELECT * FROM deliveries WHERE issue = ? AND list = ? AND state IN ({marks})"  # noqa: S608
            " ORDER BY id",
            (issue, list_name, *chosen),
        ).fetchall()
        return [_row(r) for r in rows]

    def first_sent(self, lists: Iterable[str]) -> dict[int, str]:
        """When each issue was first sent to one of `lists`: the time of its earliest `sent` row
        (the date the web archive shows for an issue file without one)."""
        chosen = list(lists)
        marks = ",".join("?" * len(chosen))
        rows = self._db.execute(
            f"SELECT issue, min(sent_at) FROM deliveries WHERE state = ? AND list IN ({marks})"  # noqa: S608
            " GROUP BY issue",
            (S.SENT, *chosen),
        )
        return {issue: sent_at for issue, sent_at in rows if sent_at}

    def lists_of(self, issue: int) -> list[str]:
        """The lists an issue has a delivery log for."""
        return [
            r[0]
            for r in self._db.execute(
                "SELECT DISTINCT list FROM deliveries WHERE issue = ? ORDER BY list", (issue,)
            )
        ]

    # -- suppressions -----------------------------------------------------------------------

    def suppress(self, list_name: str, address: str, source: str) -> bool:
        """Never send to `address` on `list_name` again. True if it was not suppressed yet."""
        with self._write() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO suppressions (list, address, source, created_at)"
                " VALUES (?, ?, ?, ?)",
                (list_name, normalize(address), source, _now()),
            )
            return cur.rowcount == 1

    def is_suppressed(self, list_name: str, address: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM suppressions WHERE list = ? AND address = ?",
            (list_name, normalize(address)),
        ).fetchone()
        return row is not None

    def suppressed(self, list_name: str) -> frozenset[str]:
        return frozenset(
            r[0]
            for r in self._db.execute(
                "SELECT address FROM suppressions WHERE list = ?", (list_name,)
            )
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
            query += f" AND source IN ({','.join('?' * len(chosen))})"
            params += chosen
        with self._write() as db:
            return db.execute(query, params).rowcount == 1

    def suppression(self, list_name: str, address: str) -> Suppression | None:
        """The suppression of `address` on `list_name` (when, and who asked), or None."""
        r = self._db.execute(
            "SELECT list, address, source, created_at FROM suppressions"
            " WHERE list = ? AND address = ?",
            (list_name, normalize(address)),
        ).fetchone()
        return None if r is None else Suppression(r[0], r[1], r[2], r[3])

    def suppressions(self, list_name: str | None = None) -> list[Suppression]:
        """Every suppression (of one list), oldest first, with when and how it was recorded."""
        where, params = ("WHERE list = ?", (list_name,)) if list_name is not None else ("", ())
        rows = self._db.execute(
            f"SELECT list, address, source, created_at FROM suppressions {where}"  # noqa: S608
            " ORDER BY created_at, list, address",
            params,
        ).fetchall()
        return [Suppression(r["list"], r["address"], r["source"], r["created_at"]) for r in rows]

    # -- bounces and complaints -------------------------------------------------------------
    # One row per (report, delivery): the report's key (its Message-ID or a digest; `smtp:ID`
    # for a refusal at send time), what it said and where it came from. The primary key is what
    # makes reading the same mailbox twice count nothing. Deliveries themselves never change:
    # a `sent` row stays `sent`, its bounce beside it.

    def deliveries_by_id(self, ids: Iterable[int]) -> list[Delivery]:
        return [r for i in sorted(set(ids)) for r in self._select("id = ?", (i,))]

    def deliveries_by_message_id(self, message_ids: Iterable[str]) -> list[Delivery]:
        return [r for m in dict.fromkeys(message_ids) for r in self._select("message_id = ?", (m,))]

    def record_bounce(
        self, report: str, delivery_id: int, kind: str, status: str, detail: str, source: str
    ) -> bool:
        """Store what `report` said about one delivery. False if that was stored before."""
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO bounce_reports"
                " (report, delivery_id, kind, status, detail, source, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (report, delivery_id, kind, status, detail[:1000], source, _now()),
            )
            return cur.rowcount == 1

    def soft_streak(self, list_name: str, recipient: str, issue: int) -> int:
        """How many issues in a row, up to `issue`, bounced for `recipient` on `list_name`; an
        issue that went out and did not bounce ends the streak."""
        rows = self._db.execute(
            "SELECT d.state, (SELECT count(*) FROM bounce_reports b"
            " WHERE b.delivery_id = d.id AND b.kind IN (?, ?))"
            " FROM deliveries d WHERE d.list = ? AND d.recipient = ? AND d.issue <= ?"
            " ORDER BY d.issue DESC",
            (*_BOUNCED_KINDS, list_name, normalize(recipient), issue),
        ).fetchall()
        streak = 0
        for state, bounced in rows:
            if state not in _WENT_OUT:
                continue  # skipped or never tried: says nothing about the mailbox
            if not bounced:
                break
            streak += 1
        return streak

    def bounce_counts(self, issue: int, list_name: str, since: str = "") -> dict[str, int]:
        """Deliveries of (issue, list) per kind of report, each delivery once per kind;
        only reports recorded at or after `since` when given."""
        return {
            kind: n
            for kind, n in self._db.execute(
                "SELECT b.kind, count(DISTINCT b.delivery_id) FROM bounce_reports b"
                " JOIN deliveries d ON d.id = b.delivery_id"
                " WHERE d.issue = ? AND d.list = ? AND b.created_at >= ? GROUP BY b.kind",
                (issue, list_name, since),
            )
        }

    def run_totals(self, issue: int, list_name: str, since: str) -> tuple[int, int, int]:
        """Since `since` (a run's start): messages answered (sent or rejected), deliveries with
        a hard bounce, deliveries with a complaint. What a send's rate guard divides."""
        (answered,) = self._db.execute(
            "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ? AND state IN (?, ?)"
            " AND updated_at >= ?",
            (issue, list_name, S.SENT, S.REJECTED, since),
        ).fetchone()
        counts = self.bounce_counts(issue, list_name, since)
        return int(answered), counts.get("hard", 0), counts.get("complaint", 0)

    def _select(self, where: str, params: tuple[object, ...]) -> list[Delivery]:
        found = self._db.execute(f"SELECT * FROM deliveries WHERE {where}", params)  # noqa: S608
        return [_row(r) for r in found.fetchall()]


def _row(r: sqlite3.Row) -> Delivery:
    return Delivery(
        id=r["id"],
        issue=r["issue"],
        list=r["list"],
        recipient=r["recipient"],
        message_id=r["message_id"],
        state=DeliveryStatus(r["state"]),
        attempts=r["attempts"],
        smtp_code=r["smtp_code"],
        smtp_reply=r["smtp_reply"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        sent_at=r["sent_at"],
        next_attempt_at=r["next_attempt_at"],
    )
