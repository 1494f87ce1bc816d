"""Nothing lost, nothing doubled: `newsletter send` killed with SIGKILL (or stopped with SIGINT)
mid-run, then re-run, against a server that counts every message by Message-ID."""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
from pathlib import Path

import psycopg
import pytest

from support.sendcli import (
    HANG,
    children,
    environment,
    finish,
    newsletter,
    spawn,
    wait_for,
    write_list,
)
from support.sendcli import sqlite_states as states
from support.smtp import Fault, FaultyHandler, start

pytestmark = pytest.mark.slow

N = 150


async def gone(pids: set[int], timeout: float = 5) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        alive = {p for p in pids if Path(f"/proc/{p}").exists()}
        if not alive:
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize(("seed", "processes"), [(1, 1), (2, 1), (3, 2), (4, 2)])
async def test_kill_9_mid_run_then_rerun_never_doubles(
    project: Path, seed: int, processes: int
) -> None:
    rng = random.Random(seed)
    addresses = write_list(project / "big.csv", N)
    # A short pause inside DATA keeps uploads in flight, so a kill lands in the in-doubt window.
    handler = FaultyHandler([Fault("data", sleep=0.01)])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4"]
        args += ["--processes", str(processes)]
        for _ in range(2):
            proc = await spawn(args, env, project)
            await wait_for(handler, len(handler.received) + rng.randint(5, 40))
            workers = children(proc.pid)
            assert len(workers) == (processes if processes > 1 else 0)
            proc.kill()
            killed = await finish(proc)
            assert killed.code == -signal.SIGKILL
            # A worker never outlives its killed parent.
            assert await gone(workers)
        # Let the server finish the uploads the dead client left behind: they count too.
        await asyncio.sleep(0.3)
        final = await newsletter(args, env, project)
    assert final.code in (0, 3), final.err
    rows = states(project)
    assert sorted(rows) == sorted(addresses)
    # Nobody got two copies, and no Message-ID reached the server twice.
    assert max(handler.by_message_id.values()) == 1
    assert max(handler.by_recipient.values()) == 1
    for recipient, (state, message_id) in rows.items():
        assert state in ("sent", "unknown"), (recipient, state)
        if state == "sent":
            assert handler.by_message_id[message_id or ""] == 1
    unknown = [r for r, (s, _) in rows.items() if s == "unknown"]
    if unknown:
        assert final.code == 3
        assert f"{len(unknown)} unknown" in final.out
    got = set(handler.by_recipient)
    missing = set(addresses) - got
    # A recipient that never arrived can only be one the log admits it does not know about.
    assert missing <= set(unknown)


async def test_kill_9_then_resend_unknown_reuses_the_message_id(project: Path) -> None:
    write_list(project / "big.csv", 40)
    # Every upload hangs for a while: a kill now always leaves messages in `sending`.
    handler = FaultyHandler([Fault("data", sleep=0.5)])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4"]
        proc = await spawn(args, env, project)
        await wait_for(handler, 4)
        await asyncio.sleep(0.1)
        proc.kill()
        await finish(proc)
        await asyncio.sleep(0.6)  # the server stores the uploads the dead client sent
        handler.faults.clear()
        rerun = await newsletter(args, env, project)
        assert rerun.code == 3
        unknown = [r for r, (s, _) in states(project).items() if s == "unknown"]
        assert unknown
        assert all(f"unknown: {r} interrupted during DATA" in rerun.out for r in unknown), rerun.out
        before = dict(handler.by_message_id)
        resend = await newsletter([*args, "--resend-unknown"], env, project)
    assert resend.code == 0, resend.err
    rows = states(project)
    assert {s for s, _ in rows.values()} == {"sent"}
    for recipient in unknown:
        message_id = rows[recipient][1] or ""
        # The same Message-ID went out again (providers drop the copy), never a new one.
        assert handler.by_message_id[message_id] == before.get(message_id, 0) + 1


@pytest.mark.parametrize("processes", [1, 2])
async def test_sigint_finishes_in_flight_messages_and_resumes(
    project: Path, processes: int
) -> None:
    addresses = write_list(project / "big.csv", N)
    handler = FaultyHandler([Fault("data", sleep=0.02)])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4"]
        args += ["--processes", str(processes)]
        proc = await spawn(args, env, project)
        await wait_for(handler, 30)
        proc.send_signal(signal.SIGINT)
        stopped = await finish(proc)
        rows = states(project)
        counts = {s: sum(1 for x, _ in rows.values() if x == s) for s in ("sent", "pending")}
        arrived = len(handler.received)
        resumed = await newsletter(args, env, project)
    assert stopped.code == 4, stopped.err
    assert "stopped by SIGINT" in stopped.err
    assert "Traceback" not in stopped.err
    # In-flight messages were finished and recorded: nothing is in doubt after a clean stop.
    assert {s for s, _ in rows.values()} <= {"sent", "pending"}
    assert counts["sent"] == arrived
    assert 30 <= counts["sent"] < N
    assert resumed.code == 0, resumed.err
    assert sorted(handler.by_recipient) == sorted(addresses)
    assert max(handler.by_message_id.values()) == 1


async def test_two_sends_at_once_are_refused(project: Path) -> None:
    write_list(project / "big.csv", 30)
    # Slow enough (6 s in all) that the second command starts while the first still sends,
    # even on a loaded machine.
    handler = FaultyHandler([Fault("data", sleep=0.2)])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "1"]
        first = await spawn(args, env, project)
        await wait_for(handler, 2)
        second = await newsletter(args, env, project)
        done = await finish(first)
    assert second.code == 1
    assert "another `newsletter send`" in second.err
    assert done.code == 0
    assert max(handler.by_recipient.values()) == 1


async def test_kill_9_while_waiting_for_354_leaves_nothing_in_doubt(project: Path) -> None:
    # issue 13.6: rows that had only reached RCPT (and DATA, without its 354) became `unknown`
    # after a kill -9, so a plain re-run never sent them though the server never had them.
    addresses = write_list(project / "big.csv", 12)
    hang = Fault("data-command", sleep=30)
    handler = FaultyHandler([hang])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4"]
        proc = await spawn(args, env, project)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while sum(hang.used.values()) < 4:  # four sessions sent DATA and wait for its 354
            assert loop.time() < deadline, "the sessions never reached DATA"
            await asyncio.sleep(0.01)
        proc.kill()
        killed = await finish(proc)
        assert killed.code == -signal.SIGKILL
        waiting = {r for r, n in hang.used.items() if n}
        rows = states(project)
        assert {rows[r][0] for r in waiting} == {"pending"}
        handler.faults.clear()
        rerun = await newsletter(args, env, project)
    assert rerun.code == 0, rerun.out + rerun.err
    assert "unknown" not in rerun.out
    assert {s for s, _ in states(project).values()} == {"sent"}
    assert sorted(handler.by_recipient) == sorted(a.lower() for a in addresses)
    assert max(handler.by_recipient.values()) == 1


def owners(project: Path, url: str) -> dict[str, tuple[str, str | None]]:
    """recipient -> (state, owner) of the main list, from either outbox (empty until the send
    has made its table)."""
    query = "SELECT recipient, state, owner FROM deliveries WHERE list = 'main'"
    if url:
        with psycopg.connect(url) as db:
            try:
                return {r: (s, o) for r, s, o in db.execute(query)}
            except psycopg.errors.UndefinedTable:
                return {}
    path = project / ".newsletter" / "outbox.sqlite3"
    if not path.exists():
        return {}
    lite = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # never made here
    try:
        return {r: (s, o) for r, s, o in lite.execute(query)}
    except sqlite3.OperationalError:  # no table yet
        return {}
    finally:
        lite.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_kill_9_with_rows_claimed_ahead_leaves_them_to_the_rerun(
    project: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A worker killed while it holds rows claimed ahead of its sessions: they were owned, never
    `sending`, so the re-run sends each of them once and none is `unknown`. At 10 msg/s a
    claim takes 20 rows and the next goes out under 10 queued; from reader 12 on, the server
    holds RCPT, so the two sessions stop short of DATA with rows 14-19 still queued: rows
    20-39 are owned only if a claim went out before the queue ran dry."""
    addresses = write_list(project / "big.csv", 60)
    held = asyncio.Event()
    handler = FaultyHandler([Fault("rcpt", hold=held, match=lambda r: r >= "reader00012@")])
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else ""
    extra = {"NEWSLETTER_OUTBOX__URL": url, "NEWSLETTER_SEND__LEASE": "2"} if url else {}
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", **extra)
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2", "--rate", "10"]
        proc = await spawn(args, env, project)
        ahead = {f"reader{i:05d}@example.com" for i in range(20, 40)}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANG
        while True:
            rows = owners(project, url) if proc.returncode is None else {}
            sent = [r for r, (s, _) in rows.items() if s == "sent"]
            if len(sent) == 12 and all(rows[r][1] for r in ahead):
                break
            assert loop.time() < deadline, f"no claim ahead: {rows}"
            await asyncio.sleep(0.01)
        proc.kill()
        killed = await finish(proc)
        assert killed.code == -signal.SIGKILL
        rows = owners(project, url)
        held.set()
        handler.faults.clear()
        rerun = await newsletter(args[:-2], env, project)  # at full speed
    # What the kill left: the rows claimed ahead owned and `pending`, nothing in doubt.
    assert {rows[r] for r in ahead} == {("pending", rows[min(ahead)][1])}
    assert "sending" not in {s for s, _ in rows.values()}
    assert rerun.code == 0, rerun.out + rerun.err
    assert "unknown" not in rerun.out
    assert {s for s, _ in owners(project, url).values()} == {"sent"}
    assert sorted(handler.by_recipient) == sorted(addresses)
    assert max(handler.by_recipient.values()) == 1
    assert max(handler.by_message_id.values()) == 1
