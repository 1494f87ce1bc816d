"""`newsletter worker` as a real process, killed with SIGKILL at any moment and started again: a
site mail goes out at most once (a kill mid-upload leaves it `unknown`, a kill before the 354
lets it go later, exactly once); SIGTERM finishes the mail in hand; on SQLite one worker per
project, on PostgreSQL two share the queue, each mail going once."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.mailqueue import MailKind, MailState
from support.sendcli import HANG, environment, finish, newsletter, spawn, wait_for
from support.smtp import Fault, FaultyHandler, start
from support.zygote import Forked

pytestmark = pytest.mark.slow


def _queue(target: Path | str, n: int) -> list[str]:
    addresses = [f"reader{i:03d}@example.org" for i in range(n)]
    with open_database(target) as database:
        queue = database.site_mail
        for address in addresses:
            queue.queue(MailKind.CONFIRM, "main", address, address, nonce="n")
    return addresses


def _states(target: Path | str) -> dict[str, MailState]:
    with open_database(target) as database:
        rows = database.backend.fetch("SELECT recipient, state FROM site_mail")
    return {str(r): MailState(str(s)) for r, s in rows}


def _env(port: int, target: Path | str, **extra: str) -> dict[str, str]:
    url = {"NEWSLETTER_OUTBOX__URL": target} if isinstance(target, str) else {}
    return environment(
        port,
        NEWSLETTER_WORKER__POLL="0.05",
        NEWSLETTER_WORKER__LEASE="2",
        **url,
        **extra,
    )


@pytest.fixture
def target(project: Path, database_target: Path | str) -> Path | str:
    """The project's outbox: its own SQLite file, or a fresh PostgreSQL database."""
    if isinstance(database_target, str):
        return database_target
    return project / ".newsletter" / "outbox.sqlite3"


async def _until(check: object, timeout: float = HANG) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("seed", [1, 2])
async def test_killed_at_random_moments_no_mail_goes_twice(
    project: Path, target: Path | str, seed: int
) -> None:
    rng = random.Random(seed)
    addresses = _queue(target, 60)
    handler = FaultyHandler([Fault("data", sleep=0.02)])  # uploads in flight when it dies
    async with start(handler) as server:
        env = _env(server.port, target)
        kills = 0
        for _ in range(4):
            proc = await spawn(["worker"], env, project)
            await wait_for(handler, min(len(handler.received) + rng.randint(3, 12), 60))
            await asyncio.sleep(rng.random() * 0.05)
            proc.kill()
            assert (await finish(proc)).code == -signal.SIGKILL
            kills += 1
            if len(handler.received) >= 60:
                break
        await asyncio.sleep(0.2)  # the uploads the dead worker left finish on the server
        last = await spawn(["worker"], env, project)
        await _until(
            lambda: all(s in (MailState.SENT, MailState.UNKNOWN) for s in _states(target).values())
        )
        last.send_signal(signal.SIGTERM)
        done = await finish(last)
    assert done.code == 0, done.err
    states = _states(target)
    assert sorted(states) == addresses
    assert max(handler.by_recipient.values()) == 1  # never twice, whatever the kill hit
    unknown = [a for a, s in states.items() if s is MailState.UNKNOWN]
    assert len(unknown) <= kills * 4  # at most the uploads in flight at each kill
    for address, state in states.items():
        if state is MailState.SENT:
            assert handler.by_recipient[address] == 1


async def test_killed_in_the_upload_the_mail_is_unknown_and_not_sent_again(
    project: Path, target: Path | str
) -> None:
    _queue(target, 1)
    hold = asyncio.Event()
    handler = FaultyHandler([Fault("data", hold=hold, times=1)])
    async with start(handler) as server:
        env = _env(server.port, target)
        proc = await spawn(["worker"], env, project)
        fault = handler.faults[0]
        await _until(lambda: sum(fault.used.values()) == 1)  # the body is in, no reply yet
        proc.kill()
        await finish(proc)
        hold.set()  # whether the server kept it, the worker cannot know
        before = handler.by_recipient["reader000@example.org"]
        again = await spawn(["worker"], env, project)
        await _until(lambda: _states(target)["reader000@example.org"] is MailState.UNKNOWN)
        await asyncio.sleep(0.5)
        again.send_signal(signal.SIGTERM)
        done = await finish(again)
    assert handler.by_recipient["reader000@example.org"] == before <= 1  # never again
    assert "unknown" in done.out


async def test_killed_before_the_354_the_mail_goes_later_once(
    project: Path, target: Path | str
) -> None:
    _queue(target, 1)
    hold = asyncio.Event()
    handler = FaultyHandler([Fault("rcpt", hold=hold, times=1)])
    async with start(handler) as server:
        env = _env(server.port, target)
        proc = await spawn(["worker"], env, project)
        fault = handler.faults[0]
        await _until(lambda: sum(fault.used.values()) == 1)
        proc.kill()
        await finish(proc)
        hold.set()
        again = await spawn(["worker"], env, project)
        # On PostgreSQL the dead worker's claim ends with its lease (2 s here).
        await _until(lambda: _states(target)["reader000@example.org"] is MailState.SENT)
        again.send_signal(signal.SIGTERM)
        await finish(again)
    assert handler.by_recipient["reader000@example.org"] == 1


async def test_sigterm_finishes_the_mail_in_hand_and_stops(
    project: Path, target: Path | str
) -> None:
    _queue(target, 1)
    hold = asyncio.Event()
    handler = FaultyHandler([Fault("data", hold=hold, times=1)])
    async with start(handler) as server:
        proc = await spawn(["worker"], _env(server.port, target), project)
        fault = handler.faults[0]
        await _until(lambda: sum(fault.used.values()) == 1)
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        assert proc.returncode is None  # still finishing the upload
        hold.set()
        done = await finish(proc)
    assert done.code == 0, done.err
    assert _states(target)["reader000@example.org"] is MailState.SENT
    assert "Worker stopped." in done.err


async def started(proc: Forked) -> None:
    """Return once the worker says it started: it holds the project's lock by then (on a
    loaded machine a second may not be enough for Python to start)."""
    assert proc.stderr is not None
    said = b""
    while not said.endswith(b"\n") or b"Worker started: " not in said:
        line = await asyncio.wait_for(proc.stderr.readline(), 60)
        assert line, f"the worker ended before it started: {said!r}"
        said += line


async def test_one_worker_per_project_on_sqlite(project: Path) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        env = _env(server.port, project / ".newsletter" / "outbox.sqlite3")
        first = await spawn(["worker"], env, project)
        await started(first)
        second = await newsletter(["worker"], env, project)
        first.send_signal(signal.SIGTERM)
        await finish(first)
    assert second.code == 1
    assert "another `newsletter worker` runs on this project" in second.err
    assert "Traceback" not in second.err


async def test_two_workers_on_postgresql_share_the_queue(project: Path, postgres_url: str) -> None:
    addresses = _queue(postgres_url, 80)
    # Every upload waits until two are in at once: with one SMTP session each, that takes
    # both workers (a clock would let the first to start take all 80 on a loaded machine).
    go = asyncio.Event()
    uploads = Fault("data", hold=go)
    handler = FaultyHandler([uploads])
    async with start(handler) as server:
        env = _env(server.port, postgres_url, NEWSLETTER_WORKER__CONCURRENCY="1")
        workers = [await spawn(["worker"], env, project) for _ in range(2)]
        await _until(lambda: sum(uploads.used.values()) >= 2, timeout=120)
        go.set()
        await wait_for(handler, 80)
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outs = [await finish(proc) for proc in workers]
    assert all(o.code == 0 for o in outs), [o.err for o in outs]
    assert sorted(handler.by_recipient) == addresses
    assert max(handler.by_recipient.values()) == 1
    per_worker = [o.out.count(": sent") for o in outs]
    assert sum(per_worker) == 80
    assert all(n > 0 for n in per_worker), per_worker  # both took part
