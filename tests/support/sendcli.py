"""Run `newsletter` as a real subprocess against a test SMTP server, from an async test."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from support.smtp import FaultyHandler
from support.zygote import Forked, zygote

SECRET = "test-secret-0123456789abcdef"
# How long a command or a wait may take before the test calls it hung: only a guard, never a
# measure. A `newsletter` process on a machine at load 10 can spend a minute just starting;
# pytest-timeout (300 s a test) is the last resort.
HANG = 180.0


@dataclass
class Done:
    code: int
    out: str
    err: str


def environment(port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(
        NEWSLETTER_SECRET=SECRET,
        NEWSLETTER_SMTP__HOST="127.0.0.1",
        NEWSLETTER_SMTP__PORT=str(port),
        NEWSLETTER_SMTP__SECURITY="none",
        NEWSLETTER_SEND__RETRY_BASE="0.01",
        NEWSLETTER_SEND__RETRY_CAP="0.05",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def shared_environment(port: int, postgres_url: str, lease: str) -> dict[str, str]:
    """`environment` for workers sharing one send of big.csv on a PostgreSQL outbox."""
    return environment(
        port,
        NEWSLETTER_LISTS__MAIN__PATH="big.csv",
        NEWSLETTER_OUTBOX__URL=postgres_url,
        NEWSLETTER_SEND__LEASE=lease,
    )


async def spawn(args: list[str], env: dict[str, str], cwd: Path) -> Forked:
    """`newsletter ARGS` in `cwd` with `env`, a real process of its own, forked from this test
    process's zygote (support.zygote: the interpreter's start and the imports paid once)."""
    return await zygote().spawn(args, env, cwd)


async def finish(proc: Forked, timeout: float = HANG) -> Done:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


async def newsletter(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = HANG
) -> Done:
    return await finish(await spawn(args, env, cwd), timeout)


def write_list(path: Path, n: int, extra: list[str] | None = None) -> list[str]:
    addresses = [f"reader{i:05d}@example.com" for i in range(n)] + (extra or [])
    path.write_text(
        "email,name\n" + "".join(f"{a},Reader {i}\n" for i, a in enumerate(addresses)),
        encoding="utf-8",
    )
    return addresses


def sqlite_states(project: Path) -> dict[str, tuple[str, str | None]]:
    """recipient -> (state, Message-ID) of the main list, from the SQLite outbox."""
    db = sqlite3.connect(project / ".newsletter" / "outbox.sqlite3")
    try:
        return {
            r: (s, m)
            for r, s, m in db.execute(
                "SELECT recipient, state, message_id FROM deliveries WHERE list = 'main'"
            )
        }
    finally:
        db.close()


async def until(check: Callable[[], bool], what: str, timeout: float = HANG) -> None:
    """Wait, without blocking the event loop, until `check()` holds; `timeout` only guards
    against a hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.002)


async def wait_for(handler: FaultyHandler, count: int, timeout: float = HANG) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(handler.received) < count:
        assert loop.time() < deadline, f"only {len(handler.received)} messages arrived"
        await asyncio.sleep(0.005)


def children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found
