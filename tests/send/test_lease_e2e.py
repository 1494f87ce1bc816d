"""A worker paused past its lease, end to end: two real `newsletter send` processes on a real
PostgreSQL outbox against a server that counts every message by Message-ID.

Worker A is frozen (SIGSTOP) with one upload waiting for the server's final reply and one
recipient waiting for its RCPT reply; worker B reaps A once the lease expires, sends what A had
claimed and turns A's upload into `unknown`; then A is woken (SIGCONT) with a dropped connection
and either a greylisting 451 (an outcome A must not write over B's row) or a 250 (A goes on to
DATA, and must not upload the body of a row that is B's now). A must find it lost its lease and
stop, with the documented message and exit code.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psycopg
import pytest

from support.sendcli import HANG, finish, newsletter, shared_environment, spawn, write_list
from support.smtp import Fault, FaultyHandler, start

pytestmark = pytest.mark.slow

N = 60
UPLOADING = "reader00020@example.com"  # A's upload in flight when it is frozen
# A's recipient waiting for its RCPT reply, on A's other session: not the row right after
# UPLOADING, whose envelope may go out behind UPLOADING's body on the same session, where the
# server reads it only after the DATA reply it holds.
WAITING = "reader00040@example.com"


def states(url: str) -> dict[str, str]:
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT recipient, state FROM deliveries WHERE list = 'main'")
        return dict(rows.fetchall())


def worker_states(url: str) -> dict[int, str]:
    with psycopg.connect(url) as db:
        return dict(db.execute("SELECT pid, state FROM workers").fetchall())


async def held(handler: FaultyHandler, url: str, *faults: Fault, timeout: float = HANG) -> None:
    """Each fault holds a reply, so the worker is inside those two SMTP transactions, and the
    log has caught up with the server: every message it stored is `sent` and only the held
    upload is `sending`. (The server reaches a hold before the worker has read the reply to
    the body before it: frozen then, that row would stay `sending` and be reaped `unknown`,
    though it was delivered once.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not all(sum(f.used.values()) for f in faults):
        assert loop.time() < deadline, "the worker never reached the held replies"
        await asyncio.sleep(0.01)
    while True:
        found = list(states(url).values())
        if found.count("sending") == 1 and found.count("sent") == len(handler.received):
            return
        assert loop.time() < deadline, f"the log never caught up: {sorted(found)}"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("answer", ["451 4.7.1 greylisted, try again later", None])
async def test_a_paused_worker_loses_its_lease_and_stops(
    project: Path, postgres_url: str, answer: str | None
) -> None:
    addresses = write_list(project / "big.csv", N)
    upload_held, rcpt_held = asyncio.Event(), asyncio.Event()
    uploading = Fault("data", hold=upload_held, drop=True, times=1, match=lambda r: r == UPLOADING)
    waiting = Fault(
        "rcpt",
        hold=rcpt_held,
        reply=answer,  # None: 250
        times=1,
        match=lambda r: r == WAITING,
    )
    handler = FaultyHandler([uploading, waiting])
    async with start(handler) as server:
        env = shared_environment(server.port, postgres_url, "2")
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2"]
        paused = await spawn(args, env, project)
        try:
            await held(handler, postgres_url, uploading, waiting)
            os.kill(paused.pid, signal.SIGSTOP)
            # What A will find when it wakes: its upload's connection dropped, and the answer
            # for a recipient that B will have sent by then (B's own RCPT is not held).
            upload_held.set()
            rcpt_held.set()
            survivor = await newsletter(args, env, project, timeout=180)
            after_b = states(postgres_url)
            status = await newsletter(["status", "--issue", "14"], env, project)
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        woken = await finish(paused)
        after_a = states(postgres_url)
        workers = worker_states(postgres_url)
        before_resend = dict(handler.by_message_id)
        resend = await newsletter([*args, "--resend-unknown"], env, project)

    # B reaped A: A's claimed rows were sent by B, A's upload in flight became `unknown`.
    assert survivor.code == 3, survivor.err
    assert f"unknown: {UPLOADING} interrupted during DATA" in survivor.out, survivor.out
    assert after_b == {a: "unknown" if a == UPLOADING else "sent" for a in addresses}
    assert f"unknown   {UPLOADING}" in status.out, status.out
    # A found it lost its lease: the documented stop and exit code, nothing written over B's
    # rows (a 451 for a recipient B sent is not recorded), no body uploaded for them.
    assert woken.code == 4, woken.err
    assert "stopped: this worker lost its lease" in woken.err, woken.err
    assert after_a == after_b
    assert workers[paused.pid] == "dead"
    assert max(before_resend.values()) == 1
    assert sum(before_resend.values()) == N - 1  # every recipient but the one in doubt
    # The upload in doubt is resent on request, under its Message-ID; still no doubles.
    assert resend.code == 0, resend.err
    assert set(states(postgres_url).values()) == {"sent"}
    assert sorted(handler.by_recipient) == sorted(addresses)
    assert max(handler.by_message_id.values()) == 1
