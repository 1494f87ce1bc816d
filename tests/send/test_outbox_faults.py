"""Faults under the delivery log once a send has it open, each made for real: a full filesystem (a
small tmpfs mounted on the state folder) while planning and while sending, another connection
holding a write transaction past [outbox] lock_wait, a damaged page in the SQLite file, and the
PostgreSQL backend terminated mid-send (pg_terminate_backend). Each is one error naming the cause
and a hint with the fix, exit code 4 (a stopped run), never a traceback; the re-run recovers as
after a kill (nobody gets two copies), and `status` says the worker that stopped is gone.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from support.sendcli import (
    Done,
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

ARGS = ["send", "--issue", "14", "--yes", "--concurrency", "2"]
EXIT_STOPPED = 4


@dataclass
class SmallDisk:
    """A tmpfs of a fixed size mounted on the project's state folder."""

    folder: Path

    def mount(self, size: str) -> None:
        _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(self.folder))

    def resize(self, size: str) -> None:
        _mount("-o", f"remount,size={size}", str(self.folder))

    def fill(self) -> Path:
        """Write a file until the filesystem refuses another byte; the file."""
        filler = self.folder / "filler"
        with filler.open("wb", buffering=0) as handle:
            for chunk in (65536, 4096, 512, 1):
                try:
                    while True:
                        handle.write(b"\0" * chunk)
                except OSError:
                    continue
        return filler


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"mount exited {done.returncode}")


@pytest.fixture
def small_disk(project: Path) -> Iterator[SmallDisk]:
    """The state folder on a tmpfs (mounting needs root: skipped without, except in CI)."""
    disk = SmallDisk(project / ".newsletter")
    disk.folder.mkdir()
    try:
        disk.mount("1M")
    except OSError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a real small filesystem (mount -t tmpfs, as root): {exc}")
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk.folder)], check=False)


def one_error(done: Done, cause: str) -> None:
    """A stopped run: the error naming `cause`, then a hint, and nothing else on stderr."""
    assert done.code == EXIT_STOPPED, done.out + done.err
    assert "Traceback" not in done.err, done.err
    lines = done.err.strip().splitlines()
    assert lines[0].startswith("error: "), done.err
    assert cause in lines[0], done.err
    assert lines[1].startswith("hint: "), done.err
    assert len(lines) == 2, done.err


def no_doubles(handler: FaultyHandler, project: Path, addresses: list[str]) -> None:
    rows = states(project)
    assert sorted(rows) == sorted(addresses)
    assert max(handler.by_recipient.values()) == 1
    assert max(handler.by_message_id.values()) == 1
    unknown = {r for r, (s, _) in rows.items() if s == "unknown"}
    assert {s for s, _ in rows.values()} <= {"sent", "unknown"}
    # A recipient the server never got is one the log admits it does not know about.
    assert set(addresses) - set(handler.by_recipient) <= unknown


async def status_says_gone(env: dict[str, str], project: Path, *, listed: bool = False) -> None:
    """`status` lists no worker of the stopped run as sending: gone, or (where the run could
    still retire, as SQLite often can) not at all. `listed`: the worker could not retire."""
    status = await newsletter(["status", "--issue", "14"], env, project)
    assert status.code == 0, status.err
    workers = [line for line in status.out.splitlines() if line.strip().startswith("worker")]
    assert all(", gone: " in line for line in workers), status.out
    if listed:
        assert workers, status.out


async def test_a_full_disk_while_planning_stops_the_run_and_the_rerun_resumes(
    project: Path, small_disk: SmallDisk
) -> None:
    addresses = write_list(project / "big.csv", 5000)  # some 2 MB of log: more than the disk
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        full = await newsletter(ARGS, env, project)
        one_error(full, ".newsletter/outbox.sqlite3: the disk is full")
        assert "Free space on the disk" in full.err
        assert handler.received == []
        await status_says_gone(env, project)
        small_disk.resize("64M")
        rerun = await newsletter(ARGS, env, project, timeout=120)
    assert rerun.code == 0, rerun.out + rerun.err
    no_doubles(handler, project, addresses)


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_a_full_disk_while_sending_stops_the_run_and_the_rerun_resumes(
    project: Path, small_disk: SmallDisk, processes: str
) -> None:
    small_disk.resize("8M")
    addresses = write_list(project / "big.csv", 300)
    handler = FaultyHandler([Fault("data", sleep=0.02)])
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        proc = await spawn([*ARGS, "--processes", processes], env, project)
        await wait_for(handler, 20)
        filler = small_disk.fill()
        full = await finish(proc)
        one_error(full, ".newsletter/outbox.sqlite3: the disk is full")
        assert len(handler.received) < len(addresses)
        filler.unlink()
        await status_says_gone(env, project)
        rerun = await newsletter(ARGS, env, project)
    assert rerun.code in (0, 3), rerun.out + rerun.err
    no_doubles(handler, project, addresses)


async def test_a_write_lock_held_past_the_wait_stops_the_run_and_the_rerun_resumes(
    project: Path,
) -> None:
    addresses = write_list(project / "big.csv", 200)
    handler = FaultyHandler([Fault("data", sleep=0.02)])
    async with start(handler) as server:
        # [outbox] lock_wait shortened from its 30 s, so the test waits 3.
        env = environment(
            server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", NEWSLETTER_OUTBOX__LOCK_WAIT="3"
        )
        proc = await spawn(ARGS, env, project)
        await wait_for(handler, 20)
        # Another program's write transaction, held until the run gives up (after 3 s).
        other = sqlite3.connect(project / ".newsletter" / "outbox.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            locked = await finish(proc, timeout=90)
        finally:
            other.execute("ROLLBACK")
            other.close()
        one_error(locked, "the delivery log stayed locked by another program for 3 s")
        await status_says_gone(env, project)
        rerun = await newsletter(ARGS, env, project)
    assert rerun.code in (0, 3), rerun.out + rerun.err
    no_doubles(handler, project, addresses)


def damage(path: Path, table: str) -> None:
    """Overwrite the root page of `table` in the SQLite file with random bytes."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (size,) = db.execute("PRAGMA page_size").fetchone()
        (root,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    finally:
        db.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(random.Random(18).randbytes(size))


async def test_a_damaged_page_is_one_error_for_send_and_status(project: Path) -> None:
    write_list(project / "big.csv", 300)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        first = await newsletter(ARGS, env, project)
        assert first.code == 0, first.err
        damage(project / ".newsletter" / "outbox.sqlite3", "deliveries")
        sent = len(handler.received)
        broken = await newsletter(ARGS, env, project)
        status = await newsletter(["status", "--issue", "14"], env, project)
    one_error(broken, ".newsletter/outbox.sqlite3: the delivery log is damaged")
    assert "sqlite3 FILE .recover" in broken.err
    assert len(handler.received) == sent  # nothing sent again
    assert status.code == 1, status.out + status.err
    assert "Traceback" not in status.err
    assert "error: .newsletter/outbox.sqlite3: the delivery log is damaged" in status.err


def terminate_sessions(url: str) -> int:
    """pg_terminate_backend for every other client session of the database; how many."""
    with psycopg.connect(url, autocommit=True) as db:
        found = db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " AND datname = current_database()"
        ).fetchall()
    return len(found)


# libpq's words for a session the server ended: its FATAL farewell when it was read, else what
# the connection found.
LIBPQ_LOST = (
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly",
    "the connection is lost",
    "EOF detected",
)


def pg_states(url: str) -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT recipient, state, message_id FROM deliveries").fetchall()
    return {r: (s, m) for r, s, m in rows}


async def test_a_terminated_postgres_session_stops_the_run_and_the_rerun_resumes(
    project: Path, postgres_url: str
) -> None:
    addresses = write_list(project / "big.csv", 200)
    handler = FaultyHandler([Fault("data", sleep=0.02)])
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_OUTBOX__URL=postgres_url,
            NEWSLETTER_SEND__LEASE="3",  # the re-run waits for the dead worker's lease
        )
        proc = await spawn(ARGS, env, project)
        await wait_for(handler, 20)
        assert terminate_sessions(postgres_url) >= 1
        cut = await finish(proc)
        one_error(cut, "lost the connection to the outbox database")
        # A send holds three connections (statements, commits, claims): which meets the ended
        # session first is a race, and libpq words each the same loss its own way.
        assert any(words in cut.err for words in LIBPQ_LOST), cut.err
        await status_says_gone(env, project, listed=True)
        rerun = await newsletter(ARGS, env, project)
    assert rerun.code in (0, 3), rerun.out + rerun.err
    rows = pg_states(postgres_url)
    assert sorted(rows) == sorted(addresses)
    assert max(handler.by_recipient.values()) == 1
    assert max(handler.by_message_id.values()) == 1
    unknown = {r for r, (s, _) in rows.items() if s == "unknown"}
    assert {s for s, _ in rows.values()} <= {"sent", "unknown"}
    assert set(addresses) - set(handler.by_recipient) <= unknown


async def test_a_terminated_postgres_session_found_by_the_lease_renewal_stops_the_run(
    project: Path, postgres_url: str
) -> None:
    # Every session waits for the server's reply to a body: the renewal of the lease is the
    # first statement to find the connection gone.
    addresses = write_list(project / "big.csv", 40)
    replies = asyncio.Event()
    handler = FaultyHandler([Fault("data", hold=replies)])
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_OUTBOX__URL=postgres_url,
            NEWSLETTER_SEND__LEASE="1.5",  # renewed every 0.5 s
        )
        proc = await spawn(ARGS, env, project)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while sum(handler.faults[0].used.values()) < 2:  # both sessions wait for a reply
            assert loop.time() < deadline, "the sessions never uploaded"
            await asyncio.sleep(0.01)
        assert terminate_sessions(postgres_url) >= 1
        await asyncio.sleep(1.5)
        replies.set()
        cut = await finish(proc)
        # The renewal's fault is the cause named, not the closed connection the sessions met.
        one_error(cut, "lost the connection to the outbox database")
        assert "terminating connection due to administrator command" in cut.err
        rerun = await newsletter(ARGS, env, project)
    assert rerun.code in (0, 3), rerun.out + rerun.err
    rows = pg_states(postgres_url)
    assert sorted(rows) == sorted(addresses)
    assert max(handler.by_recipient.values()) == 1
    assert max(handler.by_message_id.values()) == 1
