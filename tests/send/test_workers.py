"""Many workers, one send, on a real PostgreSQL outbox: two `newsletter send` processes share the
run, one is killed with SIGKILL mid-run, and a server counting every message by Message-ID sees
no recipient twice; the survivor takes the dead worker's unstarted rows once its lease expires."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psycopg
import pytest

from send.test_children import Database as Log
from support.sendcli import (
    children,
    environment,
    finish,
    newsletter,
    shared_environment,
    spawn,
    sqlite_states,
    until,
    wait_for,
    write_list,
)
from support.smtp import Fault, FaultyHandler, start

# The database's time, as leases use it; the queries of the lease test.
NOW = "SELECT extract(epoch from clock_timestamp())::float8"
ALIVE = (
    "SELECT count(*) FROM workers WHERE state = 'active'"
    " AND lease_until >= extract(epoch from clock_timestamp())::float8"
)

pytestmark = pytest.mark.slow

N = 300


def states(url: str) -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT recipient, state, message_id FROM deliveries WHERE list = 'main'")
        return {r: (s, m) for r, s, m in rows}


def workers(url: str) -> dict[str, str]:
    with psycopg.connect(url) as db:
        try:
            return dict(db.execute("SELECT id, state FROM workers").fetchall())
        except psycopg.errors.UndefinedTable:  # no worker has started yet
            return {}


async def both_active(url: str, timeout: float = 60) -> None:
    """Both workers registered (a loaded machine may take seconds to start the second)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while sum(1 for s in workers(url).values() if s == "active") < 2:
        assert loop.time() < deadline, f"workers: {workers(url)}"
        await asyncio.sleep(0.05)


async def test_two_workers_one_killed_no_doubles(project: Path, postgres_url: str) -> None:
    addresses = write_list(project / "big.csv", N)
    # A pause inside DATA keeps uploads in flight, so the kill lands in the in-doubt window.
    handler = FaultyHandler([Fault("data", sleep=0.1)])
    async with start(handler) as server:
        env = shared_environment(server.port, postgres_url, "2")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2"]
        doomed = await spawn(args, env, project)
        survivor = await spawn(args, env, project)
        try:
            await both_active(postgres_url)
            await wait_for(handler, 20)
            status = await newsletter(["status", "--issue", "14"], env, project)
            assert status.out.count("  worker    ") == 2, status.out
            assert len(handler.received) < N - 50  # the kill lands mid-run
        finally:
            doomed.kill()
        killed = await finish(doomed)
        assert killed.code == -signal.SIGKILL
        done = await finish(survivor, timeout=180)
        # The survivor alone finished the send: the rows the dead worker had claimed came
        # back to it when the lease expired.
        after = states(postgres_url)
        await asyncio.sleep(0.3)  # the server stores the uploads the dead worker left behind
        rerun = await newsletter(args, env, project)
    assert done.code in (0, 3), done.err
    assert rerun.code in (0, 3), rerun.err
    rows = states(postgres_url)
    assert sorted(rows) == sorted(addresses)
    assert {s for s, _ in after.values()} <= {"sent", "unknown"}
    assert rows == after
    # Nobody got two copies, and no Message-ID reached the server twice.
    assert max(handler.by_message_id.values()) == 1
    assert max(handler.by_recipient.values()) == 1
    assert {s for s, _ in rows.values()} <= {"sent", "unknown"}
    unknown = sorted(r for r, (s, _) in rows.items() if s == "unknown")
    # The survivor reported each upload the dead worker left in doubt, once its lease expired.
    for recipient in unknown:
        assert f"unknown: {recipient} interrupted during DATA" in done.out, done.out
    assert set(addresses) - set(handler.by_recipient) <= set(unknown)
    assert sorted(workers(postgres_url).values()).count("dead") == 1


async def test_planning_happens_once_and_the_rate_is_the_runs(
    project: Path, postgres_url: str
) -> None:
    write_list(project / "big.csv", 40)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = shared_environment(server.port, postgres_url, "1.5")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2", "--rate", "20"]
        first = await spawn(args, env, project)
        second = await spawn(args, env, project)
        results = [await finish(first), await finish(second)]
    assert [r.code for r in results] == [0, 0], [r.err for r in results]
    with psycopg.connect(postgres_url) as db:
        (generation,) = db.execute("SELECT generation FROM plans").fetchone() or (0,)
    assert generation == 1  # the second worker shared the first one's plan
    assert len(handler.by_recipient) == 40
    assert max(handler.by_message_id.values()) == 1
    times = sorted(r.at for r in handler.received)
    # 40 messages at 20/s for the whole run take about 2 s, not 1 s (two workers at 20/s each).
    assert times[-1] - times[0] >= 1.5


async def test_worker_processes_share_a_postgres_send(project: Path, postgres_url: str) -> None:
    addresses = write_list(project / "big.csv", 60)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(
            server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", NEWSLETTER_OUTBOX__URL=postgres_url
        )
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4", "--processes", "2"]
        done = await newsletter(args, env, project)
    assert done.code == 0, done.err
    assert "planned: 60 recipients (60 to send, 0 skipped)" in done.out
    assert sorted(handler.by_recipient) == sorted(addresses)
    assert max(handler.by_message_id.values()) == 1
    assert {s for s, _ in states(postgres_url).values()} == {"sent"}
    # The parent (planning) and its two worker processes, all retired.
    assert sorted(workers(postgres_url).values()) == ["done"] * 3


async def test_a_dead_worker_process_leaves_its_rows_to_its_sibling(project: Path) -> None:
    """SQLite, --processes 2: one worker process is killed; its sibling takes its rows once the
    lease expires, and the run ends (stopped: a worker died) with nothing doubled."""
    addresses = write_list(project / "big.csv", N)
    handler = FaultyHandler([Fault("data", sleep=0.05)])
    async with start(handler) as server:
        env = environment(
            server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", NEWSLETTER_SEND__LEASE="2"
        )
        args = ["send", "--issue", "14", "--yes", "--concurrency", "4", "--processes", "2"]
        proc = await spawn(args, env, project)
        try:
            await wait_for(handler, 20)
            doomed = sorted(children(proc.pid))[0]
            os.kill(doomed, signal.SIGKILL)
            done = await finish(proc, timeout=180)
        finally:
            if proc.returncode is None:
                proc.kill()
    assert done.code == 4, done.err
    assert "a worker process died" in done.err
    rows = sqlite_states(project)
    assert sorted(rows) == sorted(addresses)
    assert {s for s, _ in rows.values()} <= {"sent", "unknown"}
    assert max(handler.by_message_id.values()) == 1
    assert set(addresses) - set(handler.by_recipient) <= {
        r for r, (s, _) in rows.items() if s == "unknown"
    }


async def test_a_plan_longer_than_the_lease_reaps_neither_the_planner_nor_who_waits(
    project: Path, postgres_url: str
) -> None:
    """The planner renews its lease between batches and a worker waiting for the plan renews
    its own while it waits: with a 3 s lease and a longer plan (most of a long list is
    unsubscribed), neither is reaped, the second shares the first one's plan, and every reader
    gets one copy. (The planner did not renew while it planned: the waiting worker, or the
    planner, found itself reaped and stopped, or planned again.)"""
    # A lease of 3 s leaves a loaded machine room for one batch of 5,000 rows between renewals
    # (2 s did not, at load 2.4, one run in four); the list grows with it so that the plan
    # still outlasts the lease.
    sent, suppressed = 200, 120_000
    addresses = write_list(project / "big.csv", sent + suppressed)
    log = Log(project, postgres_url)
    log.prepare(addresses[sent:])
    handler = FaultyHandler(
        [Fault("data", sleep=0.05)]
    )  # the planner still sends when the other plans
    async with start(handler) as server:
        env = shared_environment(server.port, postgres_url, "3")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2"]
        planner = await spawn(args, env, project)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not log.scalar("SELECT count(*) FROM plans"):
            assert loop.time() < deadline, "planning never started"
            await asyncio.sleep(0.01)
        waiting = await spawn(args, env, project)
        results = [await finish(planner, timeout=180), await finish(waiting, timeout=180)]
    for done in results:
        assert done.code == 0, done.out + done.err
        assert "lost its lease" not in done.err
    assert "planned: 120200 recipients" in results[0].out, results[0].out
    assert "shared the plan of a worker already sending" in results[1].out, results[1].out
    assert log.scalar("SELECT generation FROM plans") == 1
    assert sorted(handler.by_recipient) == sorted(addresses[:sent])
    assert max(handler.by_message_id.values()) == 1
    assert sorted(workers(postgres_url).values()) == ["done", "done"]


async def test_a_planner_blocked_in_one_statement_longer_than_its_lease_keeps_it(
    project: Path, postgres_url: str, request: pytest.FixtureRequest
) -> None:
    """A plan's last statements read the suppressions; another session holds them locked for
    twice the lease. The planner's lease is renewed by its keeper all the while (its own thread
    and connection), so no other worker may take it for dead; before, only the planner's thread
    renewed it, between statements, and at load 5-7 one slow statement lost the lease."""
    sent, suppressed, lease = 20, 200, 2.0
    addresses = write_list(project / "big.csv", sent + suppressed)
    log = Log(project, postgres_url)
    log.prepare(addresses[sent:])
    handler = FaultyHandler()
    async with start(handler) as server:
        env = shared_environment(server.port, postgres_url, str(lease))
        with psycopg.connect(postgres_url) as holder:
            holder.execute("LOCK TABLE suppressions IN ACCESS EXCLUSIVE MODE")
            planner = await spawn(["send", "--issue", "14", "--yes"], env, project)
            request.addfinalizer(lambda: planner.returncode is None and planner.kill())
            await until(
                lambda: log.scalar("SELECT count(*) FROM deliveries") == sent + suppressed,
                "every batch of the plan written, its last statements waiting on the lock",
            )
            blocked_at = log.scalar(NOW)
            await until(lambda: log.scalar(NOW) > blocked_at + 2 * lease, "twice the lease")
            assert planner.returncode is None
            assert log.scalar(ALIVE) == 1, "the blocked planner's lease ran out"
            holder.rollback()
        done = await finish(planner)
    assert done.code == 0, done.out + done.err
    assert sorted(handler.by_recipient) == sorted(addresses[:sent])
