"""The children a send forks hold nothing of the parent's but their pipe, and die with it: the
list's reader and the workers of --processes, on each backend. `kill -9` of `newsletter send`
at several moments of planning leaves nothing of the dead run behind (no process, no lock, no
database session), and the re-run plans, sends every recipient exactly once and finishes.

The list is long (planning takes a second or so) but most of it is unsubscribed (suppressed in
the outbox: planning writes their rows, then skips them), so the re-run sends only a few
hundred messages. The test takes the outbox's write lock (a SQLite write transaction of its
own; on PostgreSQL the advisory lock every write transaction of the outbox takes) once planning
has reached a moment, so the run stops at its next write, and kills it there; the list's reader
child (forked once planning starts) is then alive, blocked on its full pipe, and what it holds
is looked at before the kill.
"""

from __future__ import annotations

import ast
import asyncio
import os
import shutil
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import psycopg
import pytest

from newsletter.database import open_database
from newsletter.database.postgres import WRITE_LOCK
from newsletter.send.children import drop_descriptors
from support.sendcli import children, environment, finish, newsletter, spawn, until, write_list
from support.smtp import Fault, FaultyHandler, start
from support.zygote import Forked

pytestmark = pytest.mark.slow

SENT = 300  # recipients who get the issue
SUPPRESSED = 60_000  # planned, then skipped: what makes planning last
OUTBOX = Path(".newsletter") / "outbox.sqlite3"
# Where the run is when it is killed: the write lock taken before it starts (it waits at its
# first write: registering on SQLite, recovery on PostgreSQL; no plan, no reader yet); taken
# once the plan has started (the reader forked, a few batches in at most); once half the list
# is in; and after planning, the run's first RCPT held by the server (nothing sent yet).
MOMENTS = ["before planning", "plan started", "mid-plan", "planned"]


class Database:
    """The test's own connection to the outbox the send writes: counts, and its write lock."""

    def __init__(self, project: Path, url: str | None) -> None:
        self.url = url
        self.target: Path | str = url or project / OUTBOX

    def prepare(self, suppressed: list[str]) -> None:
        """The outbox made, with `suppressed` unsubscribed from the main list."""
        open_database(self.target).close()
        rows = [("main", address) for address in suppressed]
        insert = (
            "INSERT INTO suppressions (list, address, source, created_at)"
            " VALUES ({0}, {0}, 'cli', '2026-01-01T00:00:00+00:00')"
        )
        if self.url:
            with psycopg.connect(self.url) as pg, pg.cursor() as cursor:
                cursor.executemany(insert.format("%s"), rows)
            return
        with sqlite3.connect(self.target) as db:
            db.executemany(insert.format("?"), rows)
        db.close()

    def scalar(self, sql: str) -> int:
        if self.url:
            with psycopg.connect(self.url, autocommit=True) as db:
                found = db.execute(sql).fetchone()
        else:
            db = sqlite3.connect(self.target, timeout=30)
            try:
                found = db.execute(sql).fetchone()
            finally:
                db.close()
        return int(found[0]) if found else 0

    def reached(self, moment: str) -> bool:
        if moment == "plan started":
            return self.scalar("SELECT count(*) FROM plans") > 0
        return self.scalar("SELECT count(*) FROM deliveries") >= (SENT + SUPPRESSED) // 2

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        if self.url:
            with psycopg.connect(self.url, autocommit=True) as pg:
                pg.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK,))
                try:
                    yield
                finally:
                    pg.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK,))
            return
        db = sqlite3.connect(self.target, timeout=30, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                db.execute("ROLLBACK")
        finally:
            db.close()

    def advisory_locks(self) -> int:
        """Advisory locks held by any session but this one (the send's write and plan locks)."""
        with psycopg.connect(str(self.url), autocommit=True) as db:
            found = db.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
        return int(found[0]) if found else 0


def in_folder(folder: Path) -> set[int]:
    """Processes working in `folder`, the test's own aside: a send and anything it forked."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")) == folder and int(entry.name) != os.getpid():
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def descriptors(pid: int) -> dict[int, str]:
    """fd -> what it points at (a path, `pipe:[inode]`, `socket:[inode]`)."""
    found = {}
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found[int(entry.name)] = os.readlink(entry)
        except OSError:
            continue
    return found


def posix_lockers(path: Path) -> set[int]:
    """The pids holding a POSIX (fcntl) lock on `path`, from /proc/locks."""
    inode = path.stat().st_ino
    found = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "POSIX" in fields and int(fields[-3].rsplit(":", 1)[1]) == inode:
            found.add(int(fields[-4]))
    return found


async def checked(proc: Forked) -> None:
    """Until the run printed its checks' tally (the line before it opens the outbox to send)."""
    assert proc.stdout is not None
    while not (line := await asyncio.wait_for(proc.stdout.readline(), 60)).startswith(b"check: "):
        assert line, "the run ended before its checks' tally"


def test_a_child_keeps_only_what_it_is_told_and_no_number_is_freed(tmp_path: Path) -> None:
    held = (tmp_path / "held").open("w")  # the parent's: the send lock, say
    number = held.fileno()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what each number points at after the drop
        try:
            drop_descriptors(keep=[write])
            seen = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in (number, write)}
            os.write(write, repr(seen).encode())
        finally:
            os._exit(0)
    kept = write
    os.close(write)
    report = os.read(read, 65536).decode()
    os.waitpid(pid, 0)
    os.close(read)
    held.close()
    seen = ast.literal_eval(report)
    # The parent's file is /dev/null in the child (its number still taken), the pipe kept.
    assert seen[number] == os.devnull
    assert seen[kept].startswith("pipe:")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite, else the URL of a new PostgreSQL database."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.parametrize("moment", MOMENTS)
async def test_kill_9_during_planning_leaves_nothing_and_the_rerun_resumes(
    project: Path, backend: str | None, moment: str, request: pytest.FixtureRequest
) -> None:
    addresses = write_list(project / "big.csv", SENT + SUPPRESSED)
    readers, suppressed = addresses[:SENT], addresses[SENT:]
    database = Database(project, backend)
    database.prepare(suppressed)
    released = asyncio.Event()
    first_rcpt = Fault("rcpt", hold=released, times=1) if moment == "planned" else None
    handler = FaultyHandler([first_rcpt] if first_rcpt else [])
    # On PostgreSQL the rows the dead run claimed wait for its lease to expire.
    extra = {"NEWSLETTER_OUTBOX__URL": backend, "NEWSLETTER_SEND__LEASE": "5"} if backend else {}
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", **extra)
        args = ["send", "--issue", "14", "--yes"]
        early = database.write_lock() if moment == "before planning" else nullcontext()
        with early:
            proc = await spawn(args, env, project)
            request.addfinalizer(lambda: proc.returncode is None and proc.kill())
            if first_rcpt:
                await until(lambda: bool(first_rcpt.used), "the first RCPT")
            elif moment != "before planning":
                await until(lambda: database.reached(moment), moment)
            else:
                # Past the checks a send runs first (SpamAssassin is a child for a while).
                await checked(proc)
            held = (
                database.write_lock() if moment in ("plan started", "mid-plan") else nullcontext()
            )
            with held:
                await asyncio.sleep(0.5)  # the run reaches its next write and waits there
                reader = children(proc.pid)
                if moment in ("before planning", "planned"):
                    assert reader == set()
                else:
                    # Planning is under way: the list's reader, blocked on its full pipe, holds
                    # nothing of the parent's but its end of that pipe (not the send lock, the
                    # outbox's files or its database socket).
                    (child,) = reader
                    assert database.scalar("SELECT count(*) FROM deliveries") < len(addresses)
                    fds = descriptors(child)
                    parent = set(descriptors(proc.pid).values())
                    others = {
                        fd: target
                        for fd, target in fds.items()
                        if fd > 2 and target not in (os.devnull, str(project / "big.csv"))
                    }
                    assert len(others) == 1, fds
                    (pipe,) = others.values()
                    assert pipe.startswith("pipe:"), fds
                    assert pipe in parent, fds
                assert handler.received == []  # nothing sent yet
                proc.kill()
                # (Not proc.wait(): it also waits for the output pipes, which an orphan holds.)
                await until(lambda: proc.returncode is not None, "the run to die", 60)
                assert proc.returncode == -signal.SIGKILL
                # Nothing of the dead run stays behind: no reader, no lock, no session.
                await until(lambda: not in_folder(project), "the killed run's children", 60)
        released.set()
        if backend:
            await until(lambda: database.advisory_locks() == 0, "the dead session's locks", 60)
        await finish(proc)
        rerun = await newsletter(args, env, project, timeout=120)
    assert rerun.code == 0, rerun.out + rerun.err
    if moment != "planned":
        # A plan its planner never finished is planned again, never shared. (A finished plan
        # whose planner's lease still runs is shared on PostgreSQL: either is right then.)
        assert f"planned: {len(addresses)} recipients" in rerun.out, rerun.out
    assert sorted(handler.by_recipient) == sorted(readers)
    assert max(handler.by_recipient.values()) == 1
    assert max(handler.by_message_id.values()) == 1
    assert database.scalar("SELECT count(*) FROM deliveries WHERE state = 'sent'") == SENT
    assert database.scalar("SELECT count(*) FROM deliveries WHERE state = 'skipped'") == SUPPRESSED


async def test_worker_processes_hold_nothing_of_the_parent(
    project: Path, backend: str | None, request: pytest.FixtureRequest
) -> None:
    # issue 18.3: the workers of --processes inherited the send lock, the parent's outbox
    # connection and the other workers' pipes.
    addresses = write_list(project / "big.csv", 40)
    handler = FaultyHandler([Fault("data", sleep=0.05)])  # about a second of sending
    extra = {"NEWSLETTER_OUTBOX__URL": backend} if backend else {}
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", **extra)
        args = ["send", "--issue", "14", "--yes", "--concurrency", "2", "--processes", "2"]
        proc = await spawn(args, env, project)
        request.addfinalizer(lambda: proc.returncode is None and proc.kill())
        await until(lambda: len(handler.received) >= 4, "the workers to send")
        workers = children(proc.pid)
        parent = descriptors(proc.pid)
        shared = {t for fd, t in parent.items() if fd > 2 and t.startswith(("socket:", "pipe:"))}
        assert len(workers) == 2
        for worker in workers:
            fds = {fd: t for fd, t in descriptors(worker).items() if fd > 2}
            targets = list(fds.values())
            lock = str(project / ".newsletter" / "send-14-main.lock")
            assert lock not in targets, fds
            if not backend:  # its own connection to the file, not the parent's as well
                assert targets.count(str(project / OUTBOX)) == 1, fds
                # ... with its own locks: SQLite holds a shared lock on the -shm file for as
                # long as a connection is open. A connection inherited across fork leaves the
                # child believing the parent's locks are its own, so it takes none (and its
                # writes could overlap the parent's).
                assert worker in posix_lockers(project / ".newsletter" / "outbox.sqlite3-shm")
            # Of the parent's sockets and pipes, only its own pipe to the parent.
            assert len(shared & set(targets)) == 1, (fds, parent)
        done = await finish(proc)
    assert done.code == 0, done.err
    assert sorted(handler.by_recipient) == sorted(addresses)
    assert max(handler.by_recipient.values()) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_send_stopped_during_planning_exits_4_leaves_no_reader_and_resumes(
    project: Path, backend: str | None, signum: signal.Signals, request: pytest.FixtureRequest
) -> None:
    # The reader found its pipe broken when its parent died and printed a traceback
    # (BrokenPipeError) before the kernel's SIGKILL reached it. Then SIGTERM during planning
    # killed the send (-15) and Ctrl-C printed "Aborted!" (exit 1), where README promises 4.
    # (On PostgreSQL the signal may also land in a statement: psycopg cancels it.)
    addresses = write_list(project / "big.csv", SENT + SUPPRESSED)
    database = Database(project, backend)
    handler = FaultyHandler()
    extra = {"NEWSLETTER_OUTBOX__URL": backend} if backend else {}
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", **extra)
        args = ["send", "--issue", "14", "--yes"]
        # A race each time: the pipe broken before the SIGKILL lands. (The PostgreSQL outbox
        # outlives the folder: once, from an empty database.)
        for _ in range(3 if backend is None else 1):
            shutil.rmtree(project / ".newsletter", ignore_errors=True)
            database.prepare(addresses[SENT:])
            proc = await spawn(args, env, project)
            request.addfinalizer(lambda p=proc: p.returncode is None and p.kill())
            await until(lambda: database.reached("mid-plan"), "mid-plan")
            assert len(children(proc.pid)) == 1  # the reader, sending batches as fast as it can
            proc.send_signal(signum)
            await until(lambda: not in_folder(project), "the run and its reader to end", 60)
            done = await finish(proc)
            assert done.code == 4, done.out + done.err
            assert f"stopped: stopped by {signum.name}" in done.err, done.err
            assert "Traceback" not in done.err, done.err
            assert "Aborted" not in done.out + done.err
            assert handler.received == []
        rerun = await newsletter(args, env, project, timeout=120)
    assert rerun.code == 0, rerun.out + rerun.err
    assert f"planned: {len(addresses)} recipients" in rerun.out, rerun.out
    assert sorted(handler.by_recipient) == sorted(addresses[:SENT])
    assert max(handler.by_recipient.values()) == 1
