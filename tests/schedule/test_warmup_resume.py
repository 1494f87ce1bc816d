"""A scheduled send the warm-up's daily cap stops is handed back due at the next midnight in
the newsletter's zone, and the worker resumes it then: a real `newsletter worker`, a real send,
aiosmtpd on loopback. The next day is made by moving the ramp's start back a day and the
schedule's time to now (no waiting)."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
import zoneinfo
from collections.abc import Callable
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.schedules import Schedule, ScheduleState
from support.sendcli import HANG, environment, finish, newsletter, spawn, write_list
from support.smtp import FaultyHandler, start

pytestmark = pytest.mark.slow
ZONE = "Europe/Berlin"


def _schedule(project: Path) -> Schedule:
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        (schedule,) = database.schedules.listing()
        return schedule


async def _until(check: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _ramp(project: Path, start: dt.date) -> None:
    config = project / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    head, _, rest = text.partition("[send]\n")
    rest = "\n".join(line for line in rest.splitlines() if not line.startswith("warmup"))
    ramp = f"warmup = [3, 1000]\nwarmup_start = {start.isoformat()}\n"
    config.write_text(f"{head}[send]\n{ramp}{rest}\n", encoding="utf-8")


def _now_due(project: Path) -> None:
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        database.backend.run("UPDATE schedules SET due_at = ? WHERE state = 'due'", (time.time(),))


async def test_a_send_stopped_by_the_warmup_is_resumed_the_next_day(project: Path) -> None:
    addresses = write_list(project / "big.csv", 8)
    today = dt.datetime.now(zoneinfo.ZoneInfo(ZONE)).date()
    _ramp(project, today)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_NEWSLETTER__TIMEZONE=ZONE,
            NEWSLETTER_WORKER__POLL="0.1",
        )
        at = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S Z")
        booked = await newsletter(["send", "--issue", "14", "--at", at, "--yes"], env, project)
        assert booked.code == 0, booked.err
        _now_due(project)
        worker = await spawn(["worker"], env, project)
        try:
            await _until(lambda: _schedule(project).started_at is not None)
            await _until(lambda: _schedule(project).state is ScheduleState.DUE)
            postponed = _schedule(project)
            assert len(handler.received) == 3
            _ramp(project, today - dt.timedelta(days=1))  # tomorrow: day 1 of the ramp
            _now_due(project)
            await _until(lambda: _schedule(project).state is ScheduleState.DONE)
        finally:
            worker.send_signal(signal.SIGTERM)
            done = await finish(worker)
    midnight = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), zoneinfo.ZoneInfo(ZONE))
    assert postponed.due_at == midnight.timestamp()
    assert "warm-up: 3 of 8 today, resumes at 00:00 Europe/Berlin" in postponed.outcome
    assert sorted(handler.by_recipient) == addresses
    assert max(handler.by_recipient.values()) == 1
    assert done.code == 0, done.err
