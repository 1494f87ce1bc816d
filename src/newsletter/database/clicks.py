"""Click events: the requests `newsletter serve` answered for tracked links, in; the events of
one send in time order, and deletions by age or by reader, out.

Written by the redirect endpoint (a batch at a time), read by `newsletter report`, pruned by
the worker's retention step. An event names its outbox row (`delivery_id`) only in `per-reader`
mode; in `aggregate` mode nothing in it leads to a reader (docs/guide/tracking.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from newsletter.database.backend import Backend
from newsletter.database.deliveries import FORGOTTEN
from newsletter.importers.subscribers import fold_address
from newsletter.rendering.places import Place, Region

_COLUMNS = "at, region, section, item, link, method, prefetch, agent, ip, since_delivery"
_INSERT = (
    "INSERT INTO clicks (issue, list, at, region, section, item, link, method, prefetch, agent,"
    " ip, since_delivery, delivery_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
READ_BATCH = 5000


class ClickRecord(NamedTuple):
    """One stored event, in clicks/events.py's ClickEvent field order (`row` the outbox row)."""

    at: float
    place: Place
    method: str
    prefetch: bool
    agent: str
    ip: str
    since_delivery: float | None
    row: int | None


class StoredClick(NamedTuple):
    """An event to write, with the send it belongs to."""

    issue: int
    list_name: str
    event: ClickRecord


class Clicks:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def add(self, clicks: Sequence[StoredClick]) -> None:
        """Write `clicks` in one transaction (the endpoint's batch)."""
        if not clicks:
            return
        rows = [
            (
                click.issue,
                click.list_name,
                event.at,
                int(event.place.region),
                event.place.section,
                event.place.item,
                event.place.link,
                event.method,
                int(event.prefetch),
                event.agent,
                event.ip,
                event.since_delivery,
                event.row,
            )
            for click in clicks
            for event in (click.event,)
        ]
        with self.backend.transaction():
            self.backend.many(_INSERT, rows)

    def events(
        self, issue: int, list_name: str, *, batch: int = READ_BATCH
    ) -> Iterator[ClickRecord]:
        """Every event of the send of `issue` to `list_name`, oldest first (ties in the order
        they were written), read `batch` at a time: a million events are never held."""
        after: tuple[float, int] = (float("-inf"), -1)
        while True:
            found = self.backend.fetch(
                f"SELECT {_COLUMNS}, delivery_id, id FROM clicks WHERE issue = ? AND list = ?"
                " AND (at, id) > (?, ?) ORDER BY at, id LIMIT ?",
                (issue, list_name, *after, batch),
            )
            for (
                at,
                region,
                section,
                item,
                link,
                method,
                prefetch,
                agent,
                ip,
                since,
                row,
                _,
            ) in found:
                yield ClickRecord(
                    float(at),
                    Place(Region(region), section, item, link),
                    method,
                    bool(prefetch),
                    agent,
                    ip,
                    None if since is None else float(since),
                    row,
                )
            if len(found) < batch:
                return
            after = (float(found[-1][0]), int(found[-1][-1]))

    def delivery(self, row: int) -> tuple[int, str, str | None] | None:
        """The issue, list and time of sending (ISO 8601, None if not sent) of outbox row
        `row`, or None if there is no such row or it is a forgotten reader's (kept for the
        counts without them: a click on their old link must not start a new record)."""
        found = self.backend.fetch(
            "SELECT issue, list, sent_at FROM deliveries WHERE id = ? AND recipient NOT LIKE ?",
            (row, FORGOTTEN + "%"),
        )
        return (int(found[0][0]), str(found[0][1]), found[0][2]) if found else None

    def count(self, issue: int, list_name: str) -> int:
        ((found,),) = self.backend.fetch(
            "SELECT count(*) FROM clicks WHERE issue = ? AND list = ?", (issue, list_name)
        )
        return int(found)

    def delete_older(self, before: float, *, limit: int) -> int:
        """Delete at most `limit` events from before `before` (Unix seconds), oldest first;
        how many were deleted. A bounded batch: the write lock is never held for long."""
        with self.backend.transaction():
            return self.backend.run(
                "DELETE FROM clicks WHERE id IN"
                " (SELECT id FROM clicks WHERE at < ? ORDER BY at LIMIT ?)",
                (before, limit),
            )

    def forget_reader(self, address: str, lists: Iterable[str] | None = None) -> int:
        """Delete every event that names an outbox row of `address` (on `lists`, or on every
        list): a forgotten subscriber's per-reader click data. How many were deleted."""
        where, params = "", [fold_address(address)]
        if lists is not None:
            chosen = list(lists)
            if not chosen:
                return 0
            where = f" AND list IN ({','.join('?' * len(chosen))})"
            params += chosen
        with self.backend.transaction():
            return self.backend.run(
                "DELETE FROM clicks WHERE delivery_id IN"
                f" (SELECT id FROM deliveries WHERE recipient = ?{where})",
                params,
            )
