"""One scheduled send run as `newsletter send` runs it: an (issue, list) and the worker's config
in; the send's exit and its last lines out, every line it prints passed on to the worker's log.

The worker starts the very command an editor would type, `newsletter send --issue N --list L
--yes`, as a child process: the same preparation, checks, lock, leases, in-doubt protocol and
exit codes, and nothing of the send's state in the worker. The child is in a session of its own
(a Ctrl-C on the worker's terminal reaches the worker only, which passes one SIGTERM on) and gets
SIGTERM the moment the worker dies, however it dies (PR_SET_PDEATHSIG): a worker killed with -9
leaves a send that stops as after Ctrl-C, recorded, for the next worker to resume.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from newsletter.send.children import die_with

EXIT_INCOMPLETE = 3  # `newsletter send`'s codes (README, "Errors and exit codes")
EXIT_STOPPED = 4
KEPT = 20  # last lines of each stream kept for the outcome


@dataclass
class Finished:
    code: int  # the exit code, or -N for a signal
    out: deque[str] = field(default_factory=lambda: deque(maxlen=KEPT))
    err: deque[str] = field(default_factory=lambda: deque(maxlen=KEPT))

    def summary(self) -> str:
        """The send's own summary line (`issue N -> L: 40 sent (…)`), else its last line."""
        for line in reversed(self.out):
            if " -> " in line and line.startswith("issue "):
                return line
        return self.out[-1] if self.out else ""

    def error(self) -> str:
        """What the send said went wrong: its `error:`/`stopped:` line and its hint."""
        lines = [line for line in self.err if line.startswith(("error:", "hint:", "stopped:"))]
        return " ".join(lines) or (self.err[-1] if self.err else f"exit code {self.code}")


def send_command(config: Path | None, issue: int, list_name: str) -> list[str]:
    """`newsletter [--config FILE] send --issue N --list L --yes`, with this interpreter."""
    head = [sys.executable, "-m", "newsletter"]
    if config is not None:
        head += ["--config", str(config.resolve())]
    return [*head, "send", "--issue", str(issue), "--list", list_name, "--yes"]


class SendProcess:
    """A running `newsletter send`: `stop` passes a SIGTERM on, `wait` gives how it ended."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Callable[[str], None]) -> None:
        self.proc = proc
        self.log = log
        self.finished = Finished(0)
        self.signalled = False

    @classmethod
    async def start(
        cls, command: list[str], log: Callable[[str], None], prefix: str
    ) -> SendProcess:
        parent = os.getpid()
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=lambda: die_with(parent, signal.SIGTERM),
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(proc, lambda line: log(line if line.startswith(prefix) else prefix + line))

    def stop(self) -> None:
        """SIGTERM: the send lets its uploads finish, records them and exits (code 4)."""
        if self.proc.returncode is None:
            self.signalled = True
            self.proc.send_signal(signal.SIGTERM)

    async def wait(self) -> Finished:
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        await asyncio.gather(
            self._read(self.proc.stdout, self.finished.out),
            self._read(self.proc.stderr, self.finished.err),
        )
        self.finished.code = await self.proc.wait()
        return self.finished

    async def _read(self, stream: asyncio.StreamReader, kept: deque[str]) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line past the reader's limit: take what is there
                raw = await stream.read(65536)
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line:
                kept.append(line)
                self.log(line)
