"""A scheduled send the warm-up's daily cap stops is handed back due at the next midnight in
the newsletter's zone, the time the send computed and said on its `resume-at:` line, and the
worker resumes it then: a real `newsletter worker`, a real send, aiosmtpd on loopback. The next
day is made by moving the ramp's start back a day and the schedule's time to now (no
waiting)."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import sys
import time
import zoneinfo
from collections.abc import Callable
from pathlib import Path

import pytest

from newsletter.config.settings import Settings
from newsletter.database import open_database
from newsletter.database.schedules import Schedule, ScheduleState
from newsletter.schedule.duty import ScheduleDuty
from newsletter.schedule.launch import Finished, resume_line
from newsletter.send.pipeline import EXIT_STOPPED
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


async def test_a_paused_send_is_due_again_at_the_time_the_send_gave(settings: Settings) -> None:
    """The worker postpones to the `resume-at:` value its send wrote, not to a midnight of its
    own reckoning: the send's process here is a stand-in that pauses until an odd instant."""
    until = time.time() + 86_400.25

    def paused(config: Path | None, issue: int, name: str, options: list[str]) -> list[str]:
        said = ["stopped: warm-up: 3 of 8 today, resumes at 07:00 UTC", resume_line(until)]
        code = f"print({said!r}[0]); print({said!r}[1]); raise SystemExit({EXIT_STOPPED})"
        return [sys.executable, "-c", code]

    logged: list[str] = []
    duty = ScheduleDuty(settings, "test:1:a", logged.append, paused, once=True)
    await duty.start()
    try:
        assert duty.schedules is not None
        booked = duty.schedules.book(14, "main", time.time() - 1, "UTC", "test")  # due now
        assert booked is not None
        await duty.run_once()
    finally:
        await duty.stop()
    with open_database(settings.database_target) as database:
        (schedule,) = database.schedules.listing()
    assert schedule.state is ScheduleState.DUE, logged
    assert schedule.due_at == until
    assert schedule.outcome.startswith("stopped: warm-up: 3 of 8 today, resumes at 07:00 UTC")


@pytest.mark.parametrize(
    ("line", "taken"),
    [
        ("resume-at: 1796256000.0", 1796256000.0),
        ("resume-at: nan", None),
        ("resume-at: inf", None),
        ("resume-at: 17962", 17962.0),  # cut short: a time all the same, and an earlier one
        ("resume-at: tomorrow", None),
    ],
)
def test_only_a_finite_resume_time_is_taken(line: str, taken: float | None) -> None:
    finished = Finished(4)
    assert finished.read(line) is (taken is not None)
    assert finished.resume_at == taken
