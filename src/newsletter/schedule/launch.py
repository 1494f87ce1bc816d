"""One scheduled send run as a process of its own: its command (scheduledsend.py's) in; the
send's exit, its last lines and what its dedicated lines say (a refusal by its check, the time
a warm-up pause ends) out, every other line it prints passed on to the worker's log.

The worker starts scheduledsend.py, the library's send call (send/pipeline.py, as `newsletter send
--yes` makes it, with the `--rate` and `--concurrency` the schedule kept), as a child process: the
same preparation, checks, lock, leases, in-doubt protocol and exit codes, and nothing of the send's
state in the worker. The child is in a session of its own (a Ctrl-C on the worker's terminal reaches
the worker only, which passes one SIGTERM on) and gets one SIGTERM the moment the worker dies,
however it dies: a worker killed with -9 leaves a send that stops as after Ctrl-C, its uploads
finished and recorded, for the next worker to resume.

One, not several: the kernel's parent-death signal (PR_SET_PDEATHSIG) is sent each time the child's
parent thread exits and it passes to another thread of the same process, so a child of the worker
(which has threads) could get a SIGTERM per thread, and a send takes a second one as "abandon the
uploads". So the send's parent is `relay`, a one-threaded process of this module between the two: it
dies with the worker (SIGKILL), the send with it (SIGTERM, once), and it passes on the worker's
SIGTERM and the send's exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from newsletter.send.children import die_with

KEPT = 20  # last lines kept for the outcome
READ_EVERY = 0.2  # seconds between two reads of the send's output
CHUNK = 65536
# The send's dedicated lines, values for the worker rather than words for the editor (the
# child writes them with `check_refused_line` and `resume_line`, `Finished` reads them):
# its check refused the send (JSON: why, the errors one a line), and a warm-up pause's end.
CHECK_REFUSED = "check-refused: "
RESUME_AT = "resume-at: "


def check_refused_line(why: str) -> str:
    return CHECK_REFUSED + json.dumps(why)


def resume_line(at: float) -> str:
    """`at`: a Unix time, written exactly (repr) so the worker postpones to that instant."""
    return f"{RESUME_AT}{at!r}"


@dataclass
class Finished:
    code: int  # the exit code; 128 + N: ended by signal N
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=KEPT))
    # The send's check refused it (why: its errors), so nothing was planned or sent: the
    # issue, not the send, is at fault. None: the check passed, or was never reached.
    check_refused: str | None = None
    # Paused by the warm-up's daily cap, to go on at this Unix time (the send computed it).
    resume_at: float | None = None

    def read(self, line: str) -> bool:
        """A dedicated line's value taken (True), else False: an ordinary line (one cut short
        by a full disk too, so it is logged as it is rather than taken wrongly)."""
        try:
            if line.startswith(CHECK_REFUSED):
                self.check_refused = str(json.loads(line.removeprefix(CHECK_REFUSED)))
            elif line.startswith(RESUME_AT):
                at = float(line.removeprefix(RESUME_AT))
                if not math.isfinite(at):  # a schedule due at NaN or never is no schedule
                    return False
                self.resume_at = at
            else:
                return False
        except ValueError:
            return False
        return True

    def summary(self) -> str:
        """The send's own summary line (`issue N -> L: 40 sent (…)`), else its last line."""
        for line in reversed(self.lines):
            if " -> " in line and line.startswith("issue "):
                return line
        return self.lines[-1] if self.lines else ""

    def error(self) -> str:
        """What the send said went wrong: its `error:`/`stopped:` line and its hint."""
        lines = [line for line in self.lines if line.startswith(("error:", "hint:", "stopped:"))]
        return " ".join(lines) or (self.lines[-1] if self.lines else f"exit code {self.code}")


class SendProcess:
    """A running `newsletter send`: `stop` passes a SIGTERM on, `wait` gives how it ended.

    Its output goes to an unlinked temporary file that the worker reads as it grows, not to a
    pipe: a worker killed with -9 would take a pipe's reading end with it, and the send's next
    line (its `stopped:`) would then fail it in the middle of its uploads."""

    def __init__(
        self, proc: asyncio.subprocess.Process, output: IO[bytes], log: Callable[[str], None]
    ) -> None:
        self.proc = proc
        self.output = output
        self.log = log
        self.finished = Finished(0)
        self.signalled = False

    @classmethod
    async def start(
        cls, command: list[str], log: Callable[[str], None], prefix: str
    ) -> SendProcess:
        parent = os.getpid()
        output = tempfile.TemporaryFile()  # noqa: SIM115 (closed by wait, or below)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "newsletter.schedule.launch",
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: die_with(parent),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except BaseException:
            output.close()
            raise
        return cls(
            proc, output, lambda line: log(line if line.startswith(prefix) else prefix + line)
        )

    def stop(self) -> None:
        """SIGTERM: the send lets its uploads finish, records them and exits (code 4)."""
        if self.proc.returncode is None:
            self.signalled = True
            self.proc.send_signal(signal.SIGTERM)

    async def wait(self) -> Finished:
        offset, rest = 0, b""
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self.proc.wait()), READ_EVERY)
                exited = self.proc.returncode is not None
                while chunk := os.pread(self.output.fileno(), CHUNK, offset):
                    offset += len(chunk)
                    *lines, rest = (rest + chunk).split(b"\n")
                    if len(rest) > CHUNK:  # a line without an end: taken as it is
                        lines, rest = [*lines, rest], b""
                    for line in lines:
                        self._line(line)
                if exited:
                    self._line(rest)
                    code = self.proc.returncode or 0
                    self.finished.code = 128 - code if code < 0 else code  # relay's killed
                    return self.finished
        finally:
            self.output.close()

    def _line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if line and not self.finished.read(line):
            self.finished.lines.append(line)
            self.log(line)


def relay(command: list[str]) -> int:
    """Run `command` as the one child of this one-threaded process: it gets SIGTERM once when
    this process dies; a SIGTERM to this process is passed on. Its exit code (128 + N for
    signal N)."""
    parent = os.getpid()
    child = subprocess.Popen(command, preexec_fn=lambda: die_with(parent, signal.SIGTERM))
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(relay(sys.argv[1:]))
