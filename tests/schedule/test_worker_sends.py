"""Scheduled sends started by real `newsletter worker` processes against a real SMTP server
(aiosmtpd on loopback): on PostgreSQL exactly one of two workers starts a due send; a worker
killed with SIGKILL mid-send leaves it to another, which resumes it; SIGTERM hands it back; a
send late past the grace is missed, a cancelled one never goes, an issue that fails its check
at the time is not sent; the --rate and --concurrency a schedule kept reach its send. Every
recipient ends with exactly one copy."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.schedules import Schedule, ScheduleState
from support.sendcli import HANG, children, environment, finish, newsletter, spawn, write_list
from support.smtp import Fault, FaultyHandler, start

pytestmark = pytest.mark.slow


def _env(port: int, target: Path | str, **extra: str) -> dict[str, str]:
    url = {"NEWSLETTER_OUTBOX__URL": target} if isinstance(target, str) else {}
    return environment(
        port,
        NEWSLETTER_LISTS__MAIN__PATH="big.csv",
        NEWSLETTER_WORKER__POLL="0.1",
        NEWSLETTER_WORKER__LEASE="2",
        NEWSLETTER_SEND__LEASE="2",
        **url,
        **extra,
    )


def _sqlite(project: Path) -> Path:
    return project / ".newsletter" / "outbox.sqlite3"


def _schedules(target: Path | str) -> list[Schedule]:
    with open_database(target) as database:
        return database.schedules.listing()


def _at(seconds: float) -> str:
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%d %H:%M:%S Z")


async def _book(project: Path, env: dict[str, str], *extra: str) -> None:
    """`send --at` an hour ahead: a moment seconds ahead may be past by the time a loaded
    machine has started the command, which refuses it. `_due` brings the time."""
    done = await newsletter(
        ["send", "--issue", "14", "--at", _at(3600), "--yes", *extra], env, project
    )
    assert done.code == 0, done.err


def _due(project: Path, env: dict[str, str]) -> None:
    """The time of every waiting schedule has come (the worker then starts it on its next
    look): what the test waits for is the worker, not the clock."""
    target = env.get("NEWSLETTER_OUTBOX__URL") or _sqlite(project)
    with open_database(target) as database:
        database.backend.run(
            "UPDATE schedules SET due_at = ? WHERE state = 'due' AND due_at > ?",
            (time.time(), time.time()),
        )


async def _until(check: Callable[[], bool], timeout: float = HANG) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _state(target: Path | str) -> ScheduleState:
    (schedule,) = _schedules(target)
    return schedule.state


async def test_two_workers_on_postgresql_exactly_one_starts_the_send(
    project: Path, postgres_url: str
) -> None:
    addresses = write_list(project / "big.csv", 40)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, postgres_url)
        await _book(project, env)
        _due(project, env)
        workers = [await spawn(["worker"], env, project) for _ in range(2)]
        await _until(lambda: _state(postgres_url) is ScheduleState.DONE)
        await asyncio.sleep(1.0)  # a second start would have begun by now
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outs = [await finish(proc) for proc in workers]
    assert [o.code for o in outs] == [0, 0], [o.err for o in outs]
    assert sorted(o.out.count("checking the issue") for o in outs) == [0, 1]
    assert sorted(o.out.count("starting the send") for o in outs) == [0, 1]
    assert sorted(handler.by_recipient) == addresses
    assert max(handler.by_recipient.values()) == 1
    (schedule,) = _schedules(postgres_url)
    assert schedule.outcome.startswith("issue 14 -> main: 40 sent")
    assert schedule.started_by.count(":") == 2  # one worker: host:pid:tag


async def test_a_worker_killed_mid_send_leaves_it_to_another(
    project: Path, postgres_url: str
) -> None:
    addresses = write_list(project / "big.csv", 60)
    handler = FaultyHandler([Fault("data", sleep=0.05)])
    async with start(handler) as server:
        env = _env(server.port, postgres_url, NEWSLETTER_SEND__CONCURRENCY="1")
        await _book(project, env)
        _due(project, env)
        first = await spawn(["worker"], env, project)
        await _until(lambda: len(handler.received) >= 8)
        relays = children(first.pid or 0)
        sends = {pid for relay in relays for pid in children(relay)}
        assert sends, "the worker runs its send in a child process (under a relay)"
        first.kill()  # SIGKILL: no goodbye, its claim stays until the lease runs out
        assert (await finish(first)).code == -signal.SIGKILL
        # The orphaned send gets one SIGTERM (its relay died with the worker), lets its
        # upload finish, records it and exits.
        await _until(lambda: all(not Path(f"/proc/{pid}").exists() for pid in sends), 30)
        got = len(handler.received)
        assert 8 <= got < 60
        assert _state(postgres_url) is ScheduleState.STARTED
        second = await spawn(["worker"], env, project)
        await _until(lambda: _state(postgres_url) is ScheduleState.DONE, 90)
        second.send_signal(signal.SIGTERM)
        done = await finish(second)
    assert done.code == 0, done.err
    assert "resuming the send" in done.out
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}  # exactly one copy each
    (schedule,) = _schedules(postgres_url)
    assert schedule.started_by.count(", ") == 1  # started, then resumed by another worker
    assert schedule.outcome.startswith("issue 14 -> main: 60 sent")


async def test_on_sqlite_the_worker_sends_it_and_schedule_shows_how_it_went(
    project: Path,
) -> None:
    addresses = write_list(project / "big.csv", 20)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, _sqlite(project))
        await _book(project, env)
        _due(project, env)
        proc = await spawn(["worker"], env, project)
        await _until(lambda: _state(_sqlite(project)) is ScheduleState.DONE)
        proc.send_signal(signal.SIGTERM)
        done = await finish(proc)
        listing = await newsletter(["schedule"], env, project)
    assert done.code == 0, done.err
    assert sorted(handler.by_recipient) == addresses
    assert max(handler.by_recipient.values()) == 1
    assert "issue 14 -> main: 20 sent" in done.out  # the send's own lines in the worker's log
    assert "  done  (started by " in listing.out
    assert "    issue 14 -> main: 20 sent" in listing.out


async def test_sigterm_hands_the_send_back_and_the_next_worker_resumes_it(
    project: Path,
) -> None:
    addresses = write_list(project / "big.csv", 40)
    handler = FaultyHandler([Fault("data", sleep=0.05)])
    target = _sqlite(project)
    async with start(handler) as server:
        env = _env(server.port, target, NEWSLETTER_SEND__CONCURRENCY="1")
        await _book(project, env)
        _due(project, env)
        proc = await spawn(["worker"], env, project)
        await _until(lambda: len(handler.received) >= 5)
        proc.send_signal(signal.SIGTERM)
        stopped = await finish(proc)
        (schedule,) = _schedules(target)
        assert schedule.state is ScheduleState.DUE
        assert schedule.started_at is not None  # resumed however late: never `missed`
        assert "handed back" in schedule.outcome
        got = len(handler.received)
        again = await newsletter(["worker", "--once"], env, project, timeout=90)
    assert stopped.code == 0, stopped.err
    assert "Worker stopped." in stopped.err
    assert 5 <= got < 40
    assert again.code == 0, again.err
    assert _state(target) is ScheduleState.DONE
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}


async def test_late_past_the_grace_is_missed_within_it_is_sent_cancelled_never(
    project: Path,
) -> None:
    write_list(project / "big.csv", 5)
    staging = write_list(project / "staging.csv", 3)
    target = _sqlite(project)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, target, NEWSLETTER_LISTS__STAGING__PATH="staging.csv")
        await _book(project, env, "--list", "staging")
        await _book(project, env)  # the main list's, cancelled below
        # A worker that was down: one send due 7 h ago (past the 6 h grace), one 1 h ago.
        with open_database(target) as database:
            schedules = database.schedules
            assert schedules.book(15, "main", time.time() - 7 * 3600, "Asia/Shanghai", "t")
        cancelled = await newsletter(
            ["schedule", "cancel", "--issue", "14", "--list", "main"], env, project
        )
        assert cancelled.code == 0, cancelled.err
        _due(project, env)
        done = await newsletter(["worker", "--once"], env, project, timeout=90)
        listing = await newsletter(["schedule", "--all"], env, project)
    assert done.code == 0, done.err
    states = {(s.issue, s.list): s for s in _schedules(target)}
    assert states[15, "main"].state is ScheduleState.MISSED
    assert "[schedule] grace (6.0 h)" in states[15, "main"].outcome
    assert states[14, "main"].state is ScheduleState.CANCELLED
    assert states[14, "staging"].state is ScheduleState.DONE
    assert sorted(handler.by_recipient) == staging  # nothing of the missed or the cancelled
    assert "issue 15 -> main: missed: not sent" in done.out
    assert "  missed  (booked by t)" in listing.out


@pytest.mark.parametrize("broken", ["markers", "gone"])
async def test_an_issue_that_fails_check_at_its_time_is_not_sent(
    project: Path, broken: str
) -> None:
    write_list(project / "big.csv", 5)
    target = _sqlite(project)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, target)
        await _book(project, env)
        path = project / "issues" / "14.yaml"
        if broken == "gone":
            path.unlink()
        else:
            # The template leaves its own code in every email (an issue's `{{` is only text).
            template = project / "templates" / "email" / "issue.txt"
            template.write_text(
                template.read_text(encoding="utf-8") + "{% raw %}{{ name }}{% endraw %}\n",
                encoding="utf-8",
            )
        _due(project, env)
        done = await newsletter(["worker", "--once"], env, project, timeout=90)
        listing = await newsletter(["schedule"], env, project)
    assert done.code == 0, done.err
    assert handler.received == []
    (schedule,) = _schedules(target)
    assert schedule.state is ScheduleState.FAILED
    assert schedule.started_at is None
    assert "the issue fails `newsletter check` now" in schedule.outcome
    # No issue left: the file named is the one a new project writes (issues/14.md).
    expected = "[markers]" if broken == "markers" else "issues/14.md: no such issue"
    assert expected in schedule.outcome
    assert "  failed  (booked by " in listing.out
    assert expected in listing.out
    assert "Traceback" not in done.out + done.err


async def test_the_worker_sends_with_the_rate_and_concurrency_the_schedule_kept(
    project: Path,
) -> None:
    addresses = write_list(project / "big.csv", 12)
    target = _sqlite(project)
    handler = FaultyHandler([Fault("data", sleep=0.05)])
    async with start(handler) as server:
        env = _env(server.port, target, NEWSLETTER_SEND__CONCURRENCY="4")
        await _book(project, env, "--rate", "1000", "--concurrency", "1")
        listing = await newsletter(["schedule"], env, project)
        _due(project, env)
        done = await newsletter(["worker", "--once"], env, project, timeout=90)
    assert "; sent with --rate 1000 --concurrency 1)" in listing.out
    assert done.code == 0, done.err
    assert _state(target) is ScheduleState.DONE
    assert "starting the send (worker " in done.out
    assert ") with --rate 1000 --concurrency 1" in done.out
    assert handler.connections == 1  # the kept --concurrency 1, not [send] concurrency = 4
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}
