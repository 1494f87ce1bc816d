"""A scheduled send the editor started by hand (`newsletter send` run without waiting for the
worker), with real `newsletter` processes against a real SMTP server: run to its end before the
schedule falls due, the schedule is done, sent by hand, and nothing starts (nor is the issue
checked again); still running when the worker comes to it, the schedule stays open and the next
look finishes it; a hand send that takes the lock while the worker's send starts does not fail
the schedule either. Every recipient ends with exactly one copy."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from newsletter.database.schedules import ScheduleState
from newsletter.send.coordinator import send_lock
from schedule.test_worker_sends import _book, _due, _env, _schedules, _sqlite, _state, _until
from support.sendcli import finish, newsletter, spawn, write_list
from support.smtp import Fault, FaultyHandler, start

pytestmark = pytest.mark.slow


def _target(project: Path, backend: str, request: pytest.FixtureRequest) -> Path | str:
    if backend == "sqlite":
        return _sqlite(project)
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_send_finished_by_hand_leaves_its_schedule_done(
    project: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    addresses = write_list(project / "big.csv", 5)
    target = _target(project, backend, request)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, target)
        await _book(project, env)
        hand = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        assert hand.code == 0, hand.err
        # The editor moves on: the file no longer passes `check`. It went out; that stands.
        path = project / "issues" / "14.yaml"
        path.write_text(
            path.read_text(encoding="utf-8").replace(
                "title: AI系统内容推荐第14期", 'title: "AI系统内容推荐第14期 {{ name }}"'
            ),
            encoding="utf-8",
        )
        _due(project, env)
        done = await newsletter(["worker", "--once"], env, project, timeout=90)
        listing = await newsletter(["schedule"], env, project)
    assert done.code == 0, done.err
    assert "starting the send" not in done.out
    assert "checking the issue" not in done.out
    (schedule,) = _schedules(target)
    assert schedule.state is ScheduleState.DONE
    expected = "sent by hand before its time: issue 14 -> main: 5 sent; nothing started"
    assert schedule.outcome == expected
    assert f"issue 14 -> main: done: {expected}" in done.out
    assert "  done  (booked by " in listing.out
    assert f"    {expected}" in listing.out
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_send_running_by_hand_keeps_its_schedule_open_until_it_ends(
    project: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    addresses = write_list(project / "big.csv", 30)
    target = _target(project, backend, request)
    # After two, the hand send's uploads wait for the test: still running when the worker
    # looks, however long a loaded machine takes to start the worker.
    go = asyncio.Event()
    handler = FaultyHandler()
    handler.faults.append(Fault("data", hold=go, match=lambda _: len(handler.received) >= 2))
    async with start(handler) as server:
        env = _env(server.port, target, NEWSLETTER_SEND__CONCURRENCY="1")
        await _book(project, env)
        hand = await spawn(["send", "--issue", "14", "--yes"], env, project)
        await _until(lambda: len(handler.received) >= 2)
        _due(project, env)
        look = await newsletter(["worker", "--once"], env, project, timeout=90)
        assert look.code == 0, look.err
        (waiting,) = _schedules(target)
        assert len(handler.received) < 30, "the hand send ended before the worker looked"
        assert waiting.state is ScheduleState.DUE
        assert waiting.started_at is None
        assert waiting.outcome.startswith("waiting: ")
        assert waiting.outcome.endswith("; tried again on the next look")
        assert "`newsletter send` of issue 14 to 'main'" in waiting.outcome
        assert "starting the send" not in look.out
        listing = await newsletter(["schedule"], env, project)
        assert "  due  (booked by " in listing.out
        assert "    waiting: " in listing.out
        go.set()
        by_hand = await finish(hand, 90)
        assert by_hand.code == 0, by_hand.err
        again = await newsletter(["worker", "--once"], env, project, timeout=90)
    assert again.code == 0, again.err
    assert _state(target) is ScheduleState.DONE
    (schedule,) = _schedules(target)
    assert schedule.outcome.startswith("sent by hand before its time: issue 14 -> main: 30 sent")
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}


async def test_a_hand_send_that_takes_the_lock_as_the_worker_starts_does_not_fail_it(
    project: Path,
) -> None:
    """The editor's send takes the SQLite send lock between the worker's look and its send's
    start (held here by this test, as a `newsletter send` holds it): the worker's send refuses,
    and the schedule waits for the lock instead of failing."""
    addresses = write_list(project / "big.csv", 5)
    target = _sqlite(project)
    handler = FaultyHandler()
    state_dir = project / ".newsletter"
    async with start(handler) as server:
        env = _env(server.port, target)
        await _book(project, env)
        _due(project, env)
        worker = await spawn(["worker"], env, project)
        try:
            assert worker.stdout is not None
            while b"starting the send" not in await asyncio.wait_for(worker.stdout.readline(), 60):
                assert worker.returncode is None, "the worker ended before it started the send"
            # The worker saw no send of its own (issue, list) and starts one; its child checks the
            # issue (a second and more) before it takes the lock, which by then the editor holds.
            with send_lock(state_dir, 14, "main"):
                await _until(lambda: _schedules(target)[0].outcome.startswith("waiting: "), 60)
                (waiting,) = _schedules(target)
                assert waiting.state is ScheduleState.DUE
                assert f"(pid {os.getpid()})" in waiting.outcome
                assert handler.received == []
            await _until(lambda: _state(target) is ScheduleState.DONE, 60)
        finally:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        done = await finish(worker)
    assert done.code == 0, done.err
    log = done.out
    assert "is running (pid" in log
    assert "; tried again on the next look" in log
    assert "failed" not in log
    (schedule,) = _schedules(target)
    assert schedule.outcome.startswith("issue 14 -> main: 5 sent (5 sent by this run")
    assert sorted(handler.by_recipient) == addresses
    assert set(handler.by_recipient.values()) == {1}
