"""The workers' heartbeats on both backends: a beat upserts the worker's row, the youngest is
read back, and a row a day old goes at the next beat of any worker."""

from __future__ import annotations

from newsletter.database import Database
from newsletter.database.heartbeats import FORGET_AFTER, Beat


def test_the_youngest_beat_is_read_and_a_dead_workers_row_goes_after_a_day(
    database: Database,
) -> None:
    beats = database.heartbeats
    assert beats.latest() is None
    beats.beat("w1", "host-a", 11, 1000.0)
    beats.beat("w2", "host-b", 22, 1005.0)
    beats.beat("w1", "host-a", 11, 1010.0)  # the same worker again: its row, updated
    assert beats.latest() == Beat("w1", "host-a", 11, 1010.0)
    assert database.backend.fetch("SELECT count(*) FROM heartbeats")[0][0] == 2
    beats.beat("w3", "host-c", 33, 1005.0 + FORGET_AFTER + 1)
    rows = database.backend.fetch("SELECT worker FROM heartbeats ORDER BY worker")
    assert [r[0] for r in rows] == ["w1", "w3"]
