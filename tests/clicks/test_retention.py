"""The worker's retention step on both backends: events past `[privacy] retention_days` go, in
bounded batches, the newer stay; a forgotten reader's events go with them, no one else's."""

from __future__ import annotations

import asyncio
import time

from newsletter.clicks.retention import (
    DAY,
    PRUNE_EVERY,
    RetentionDuty,
    forget_reader,
    prune_clicks,
)
from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.rendering.places import Place, Region
from support.database import plan

NOW = 1_800_000_000.0


def click(at: float, row: int | None = None) -> StoredClick:
    record = ClickRecord(at, Place(Region.TITLE), "GET", False, "browser:edge", "", None, row)
    return StoredClick(14, "main", record)


def test_events_past_the_window_go_in_bounded_batches(
    database: Database, settings: Settings
) -> None:
    days = settings.privacy.retention_days
    old = [click(NOW - (days + 1) * DAY - n) for n in range(23)]
    kept = [click(NOW - (days - 1) * DAY), click(NOW - 60)]
    database.clicks.add(old + kept)
    first = prune_clicks(database, settings, now=NOW, batch=5, max_batches=3)
    assert first.deleted == 15
    assert first.done is False
    second = prune_clicks(database, settings, now=NOW, batch=5, max_batches=3)
    assert (second.deleted, second.done) == (8, True)
    assert prune_clicks(database, settings, now=NOW).deleted == 0
    assert [e.at for e in database.clicks.events(14, "main")] == [r.event.at for r in kept]


def test_a_shorter_window_takes_more(database: Database, settings: Settings) -> None:
    database.clicks.add([click(NOW - 40 * DAY), click(NOW - 10 * DAY)])
    short = settings.model_copy(
        update={"privacy": settings.privacy.model_copy(update={"retention_days": 30})}
    )
    assert prune_clicks(database, short, now=NOW).deleted == 1
    assert database.clicks.count(14, "main") == 1


def test_a_forgotten_reader_takes_their_events(database: Database) -> None:
    plan(database, 14, "main", ["ann@example.com", "bob@example.com"])
    rows = {d.recipient: d.id for d in database.deliveries.rows(14, "main")}
    database.clicks.add(
        [click(NOW, rows["ann@example.com"]), click(NOW, rows["bob@example.com"]), click(NOW)]
    )
    assert forget_reader(database, "ann@example.com") == 1
    assert [e.row for e in database.clicks.events(14, "main")] == [rows["bob@example.com"], None]


def test_the_worker_duty_prunes_until_done_then_waits(
    database: Database, settings: Settings, database_target: object
) -> None:
    days = settings.privacy.retention_days
    database.clicks.add([click(time.time() - (days + 2) * DAY - n) for n in range(7)])
    database.clicks.add([click(time.time())])
    chosen = settings.model_copy(
        update={"outbox": settings.outbox.model_copy(update={"url": _url(database_target)})}
    )
    said: list[str] = []
    duty = RetentionDuty(chosen, said.append)

    async def rounds() -> list[float]:
        await duty.start()
        try:
            return [await duty.run_once(), await duty.run_once()]
        finally:
            await duty.stop()

    waits = asyncio.run(rounds())
    assert waits == [PRUNE_EVERY, PRUNE_EVERY]
    assert duty.deleted == 7
    assert said == [f"click retention: 7 event(s) older than {days} days deleted"]
    assert database.clicks.count(14, "main") == 1


def _url(target: object) -> str:
    return target if isinstance(target, str) else f"sqlite:///{target}"
