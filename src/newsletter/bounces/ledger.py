"""The outbox's record of bounces and complaints: (report, delivery) rows in, counts and streaks
out. Mixed into the Outbox, in plain SQL that SQLite and PostgreSQL both run.

`bounce_reports` holds one row per (report, delivery): the report's key (its Message-ID, or a
digest of its bytes; `smtp:` for a refusal at send time), what it said (kind, RFC 3463 status,
detail) and where it came from (dsn, arf, flufl.bounce, smtp). Its primary key is what makes a
second reading of the same mailbox count nothing: `record_bounce` says whether the row is new.
The deliveries themselves are never changed: a `sent` row stays `sent`, with its bounce beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from newsletter.bounces.kinds import Kind

SCHEMA = """
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

# States in which a message may have reached the reader's server (a bounce can follow).
_WENT_OUT = ("sent", "rejected", "unknown")
_MAX_DETAIL = 1000


@dataclass(frozen=True)
class Sent:
    """The outbox row a report is about."""

    id: int
    issue: int
    list: str
    recipient: str
    message_id: str | None
    state: str


class BounceLedger:
    """The bounce half of the Outbox; the backend supplies `_run`, `_fetch` and `_write`."""

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise NotImplementedError

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def deliveries_by_id(self, ids: Iterable[int]) -> list[Sent]:
        return [r for i in sorted(set(ids)) for r in self._sent("id = ?", (i,))]

    def deliveries_by_message_id(self, message_ids: Iterable[str]) -> list[Sent]:
        return [r for m in dict.fromkeys(message_ids) for r in self._sent("message_id = ?", (m,))]

    def record_bounce(
        self, report: str, delivery_id: int, kind: Kind, status: str, detail: str, source: str
    ) -> bool:
        """Store what `report` said about one delivery. False if that was stored before."""
        from newsletter.outbox import _now  # the outbox's clock; imported late (it imports us)

        with self._write():
            return (
                self._run(
                    "INSERT INTO bounce_reports"
                    " (report, delivery_id, kind, status, detail, source, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (report, delivery_id, kind.value, status, detail[:_MAX_DETAIL], source, _now()),
                )
                == 1
            )

    def soft_streak(self, list_name: str, recipient: str, issue: int) -> int:
        """How many issues in a row, up to `issue`, bounced for `recipient` on `list_name`: an
        issue that went out and did not bounce ends the streak."""
        rows = self._fetch(
            "SELECT d.issue, d.state, (SELECT count(*) FROM bounce_reports b"
            " WHERE b.delivery_id = d.id AND b.kind IN (?, ?))"
            " FROM deliveries d WHERE d.list = ? AND d.recipient = ? AND d.issue <= ?"
            " ORDER BY d.issue DESC",
            (Kind.SOFT.value, Kind.HARD.value, list_name, recipient, issue),
        )
        streak = 0
        for _, state, bounced in rows:
            if state not in _WENT_OUT:
                continue  # skipped or never tried: says nothing about the mailbox
            if not bounced:
                break
            streak += 1
        return streak

    def bounce_counts(self, issue: int, list_name: str, since: str = "") -> dict[Kind, int]:
        """Deliveries of (issue, list) per kind of report (each delivery counted once per kind),
        optionally only reports recorded at or after `since`."""
        counts = dict.fromkeys(Kind, 0)
        for kind, n in self._fetch(
            "SELECT b.kind, count(DISTINCT b.delivery_id) FROM bounce_reports b"
            " JOIN deliveries d ON d.id = b.delivery_id"
            " WHERE d.issue = ? AND d.list = ? AND b.created_at >= ? GROUP BY b.kind",
            (issue, list_name, since),
        ):
            counts[Kind(kind)] = int(n)
        return counts

    def _sent(self, where: str, params: Sequence[Any]) -> Iterator[Sent]:
        for row in self._fetch(
            "SELECT id, issue, list, recipient, message_id, state FROM deliveries"  # noqa: S608
            f" WHERE {where}",
            params,
        ):
            yield Sent(int(row[0]), int(row[1]), row[2], row[3], row[4], row[5])
