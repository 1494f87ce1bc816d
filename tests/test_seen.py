"""The duplicate check's memory: keys past one table go to runs on disk and are still found,
with the line they were first seen on; what stays in memory is one dict of at most half a
table and the filter."""

from __future__ import annotations

import pytest

from newsletter.importers.seen import SeenKeys


class Small(SeenKeys):
    TABLE = 1 << 6  # a run every 32 keys
    BLOOM = 1 << 12


class Crowded(SeenKeys):
    TABLE = 1 << 4
    BLOOM = 1 << 3  # every new key passes the filter: each is looked for in every run


@pytest.mark.parametrize("kind", [Small, Crowded])
def test_every_repeat_names_its_first_line_across_runs(kind: type[SeenKeys]) -> None:
    keys = [f"reader{i}@example.com" for i in range(500)]
    with kind() as seen:
        assert [seen.add(k, line) for line, k in enumerate(keys, start=2)] == [None] * 500
        assert len(seen._runs) > 10  # most keys are on disk now
        assert len(seen._table) < kind.TABLE // 2
        # Repeats of keys in old runs, in the newest run and in the table.
        for i in (0, 1, 250, 480, 499):
            assert seen.add(keys[i], 9999) == i + 2
        assert seen.add("someone-new@example.com", 600) is None
        assert seen.add("someone-new@example.com", 601) == 600


def test_close_removes_the_runs() -> None:
    seen = Small()
    for i in range(100):
        seen.add(str(i), i)
    assert seen._file is not None
    file = seen._file
    seen.close()
    assert file.closed


def test_a_short_list_stays_in_memory() -> None:
    with SeenKeys() as seen:
        for i in range(20_000):
            assert seen.add(f"user{i}@example.com", i + 2) is None
        assert seen.add("user0@example.com", 99_999) == 2
        assert seen.add("user19999@example.com", 99_999) == 20_001
        assert seen.add("new@example.com", 5) is None
        assert seen._file is None  # a list this short never touches the disk


def test_a_probe_that_wraps_past_the_end_of_a_run_is_followed() -> None:
    """Keys hashing to a run's last slots probe on from slot 0 (found failing in CI, with
    a probe that started near the end of a 16-slot run)."""

    class Wrapping(SeenKeys):
        TABLE = 1 << 4

    with Wrapping() as seen:
        values = {i: hash(f"k{i}") & 0xFFFF_FFFF_FFFF_FFFF for i in range(2000)}
        # Eight keys whose hashes all name slot 15: the run puts one there and wraps the rest.
        tail = [i for i, v in values.items() if v & 15 == 15][:8]
        assert len(tail) == 8
        for line, i in enumerate(tail, start=2):
            assert seen.add(f"k{i}", line) is None
        assert len(seen._runs) == 1
        assert not seen._table
        for line, i in enumerate(tail, start=2):
            assert seen.add(f"k{i}", 999) == line
