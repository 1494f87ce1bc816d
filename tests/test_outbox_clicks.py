"""The stores of what readers read, on both backends: click events (written in batches, read in
time order a batch at a time, pruned by age in bounded batches, forgotten with their reader), the
links each tracked send carried, and the send's figures for the report."""

from __future__ import annotations

from newsletter.clicks.events import ClickEvent
from newsletter.database import Database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.database.records import BOUNCED, EDITOR_SOURCE
from newsletter.models import DeliveryStatus as S
from newsletter.rendering.places import CANARY, Place, Region
from support.database import plan, record

ITEM = Place(Region.TITLE, 0, 1)
LINKS = Place(Region.LINKS, 1, 0, 2)


def event(at: float, place: Place = ITEM, row: int | None = None, **fields: object) -> ClickRecord:
    values: dict[str, object] = {
        "at": at,
        "place": place,
        "method": "GET",
        "prefetch": False,
        "agent": "browser:firefox",
        "ip": "203.0.113.0/24",
        "since_delivery": None if row is None else 3600.0,
        "row": row,
    }
    values.update(fields)
    return ClickRecord(**values)  # type: ignore[arg-type]


def test_a_record_has_the_events_fields_in_their_order() -> None:
    assert ClickRecord._fields == ClickEvent._fields


def test_events_come_back_in_time_order_a_batch_at_a_time(database: Database) -> None:
    clicks = database.clicks
    written = [
        event(30.0, LINKS, method="HEAD"),
        event(10.0),
        event(20.0, CANARY, prefetch=True, agent="machine:python-requests", ip=""),
        event(20.0, ITEM, row=7),  # the same moment: the order they were written in
        event(40.5, LINKS, row=9, since_delivery=None),
    ]
    clicks.add([StoredClick(14, "main", e) for e in written])
    clicks.add([StoredClick(14, "staging", event(5.0)), StoredClick(15, "main", event(6.0))])
    read = list(clicks.events(14, "main", batch=2))
    assert read == sorted(written, key=lambda e: e.at)
    assert read[1].place is not None
    assert read[1].place == CANARY
    assert isinstance(read[0].at, float)
    assert read[1].prefetch is True
    assert clicks.count(14, "main") == 5
    assert clicks.count(14, "staging") == 1
    assert list(clicks.events(16, "main")) == []


def test_old_events_are_deleted_oldest_first_in_bounded_batches(database: Database) -> None:
    clicks = database.clicks
    clicks.add([StoredClick(14, "main", event(float(n))) for n in range(10)])
    assert clicks.delete_older(7.0, limit=3) == 3
    assert [e.at for e in clicks.events(14, "main")] == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert clicks.delete_older(7.0, limit=100) == 4
    assert clicks.delete_older(7.0, limit=100) == 0
    assert clicks.count(14, "main") == 3


def test_a_forgotten_reader_takes_their_clicks_and_no_one_elses(database: Database) -> None:
    plan(database, 14, "main", ["ann@example.com", "bob@example.com"])
    plan(database, 14, "staging", ["ann@example.com"])
    rows = {(d.list, d.recipient): d.id for d in database.deliveries.rows(14, "main")}
    rows |= {(d.list, d.recipient): d.id for d in database.deliveries.rows(14, "staging")}
    ann, bob = rows[("main", "ann@example.com")], rows[("main", "bob@example.com")]
    ann_staging = rows[("staging", "ann@example.com")]
    database.clicks.add(
        [
            StoredClick(14, "main", event(1.0, row=ann)),
            StoredClick(14, "main", event(2.0, row=bob)),
            StoredClick(14, "staging", event(3.0, row=ann_staging)),
            StoredClick(14, "main", event(4.0)),  # aggregate: names no one
        ]
    )
    assert database.clicks.forget_reader("Ann@Example.com", lists=["staging"]) == 1
    assert database.clicks.forget_reader("ann@example.com", lists=[]) == 0
    assert database.clicks.forget_reader("ann@example.com") == 1
    assert [e.row for e in database.clicks.events(14, "main")] == [bob, None]
    assert database.clicks.delivery(bob) == (14, "main", None)
    assert database.clicks.delivery(10**9) is None


def test_a_sends_links_are_replaced_by_its_next_run(database: Database) -> None:
    links = database.sent_links
    assert links.links(14, "main") is None
    assert links.mode(14, "main") is None
    links.record(14, "main", "aggregate", [(ITEM, "https://a.example/"), (LINKS, "https://b/")])
    links.record(14, "staging", "per-reader", [(ITEM, "https://staging.example/")])
    assert links.links(14, "main") == {ITEM: "https://a.example/", LINKS: "https://b/"}
    links.record(14, "main", "per-reader", [(ITEM, "https://fixed.example/")])
    assert links.links(14, "main") == {ITEM: "https://fixed.example/"}
    assert links.mode(14, "main") == "per-reader"
    assert links.links(14, "staging") == {ITEM: "https://staging.example/"}
    links.record(15, "main", "aggregate", [])
    assert links.links(15, "main") == {}


def _sent(database: Database, issue: int, addresses: list[str], at: str) -> dict[str, int]:
    plan(database, issue, "main", addresses)
    ids = {d.recipient: d.id for d in database.deliveries.rows(issue, "main")}
    for address in addresses:
        record(database, ids[address], S.SENT)
        database.backend.run("UPDATE deliveries SET sent_at = ? WHERE id = ?", (at, ids[address]))
    return ids


def test_a_sends_figures_per_minute_and_what_readers_did(database: Database) -> None:
    readers = [f"r{n}@example.com" for n in range(6)]
    ids = _sent(database, 14, readers[:4], "2026-11-01T09:00:10.000+00:00")
    ids |= _sent(database, 14, readers[4:], "2026-11-01T09:02:59.999+00:00")
    plan(database, 14, "main", ["late@example.com"])  # planned, never sent
    database.bounces.record("r1", ids[readers[1]], "hard", "5.1.1", "", "dsn")
    database.bounces.record("r1b", ids[readers[1]], "soft", "4.2.2", "", "dsn")
    database.bounces.record("r2", ids[readers[2]], "complaint", "", "", "arf")
    database.bounces.record("r3", ids[readers[3]], "delayed", "4.4.1", "", "dsn")
    # Issue 15 goes to r0 and r4 later; r0 leaves after it, r4 between the two issues.
    later = _sent(database, 15, [readers[0], readers[4]], "2026-11-08T09:00:00.000+00:00")
    assert later
    for address, when, source in [
        (readers[0], "2026-11-09T00:00:00.000+00:00", "one-click"),
        (readers[4], "2026-11-02T00:00:00.000+00:00", "web"),
        (readers[5], "2026-11-03T00:00:00.000+00:00", EDITOR_SOURCE),
        (readers[1], "2026-11-01T10:00:00.000+00:00", BOUNCED),
    ]:
        database.suppressions.add("main", address, source)
        database.backend.run(
            "UPDATE suppressions SET created_at = ? WHERE address = ?", (when, address)
        )
    figures = database.send_figures.of(14, "main")
    assert figures.sent == 6
    assert figures.per_minute == {"2026-11-01T09:00": 4, "2026-11-01T09:02": 2}
    assert (figures.bounced, figures.complained) == (1, 1)
    assert figures.unsubscribed == 2  # r4 (between the issues) and r5; r0 left after 15
    assert database.send_figures.of(15, "main").unsubscribed == 1
    assert database.send_figures.of(16, "main").sent == 0
