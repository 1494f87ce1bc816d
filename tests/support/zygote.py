"""`newsletter` commands forked from a process that has imported the tool once: a command line, an
environment and a folder in; a real process running it, out.

The kill tests start real `newsletter` processes, hundreds in a run, and most of each start was
the interpreter's and the imports' (about half a second of CPU, the same every time). A zygote,
one per test process, imports the tool once and forks a child per command. The child is a
process of its own, like one `python -m newsletter` starts: its own pid (to signal, to kill with
-9), its own pipes for stdin, stdout and stderr, its own folder and environment; it runs the
console script's `main()`. It shares with the zygote only what importing did, so a test of the
interpreter's start itself (tests/cli/test_startup.py, the wheel's) starts `python -m newsletter`
as a user would.

The zygote reports each child's pid when it forks it and its exit status when it ends, over a
connection of its own (a Unix SEQPACKET socket: one message each); `Forked` makes of that the
part of asyncio's Process the tests use. The zygote ends when its test process does (its stdin
closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
_MESSAGE = 1 << 20  # a request: the command line and the environment, as JSON


class Forked:
    """A forked command as the tests use asyncio's Process: pid, returncode, stdout, stderr,
    wait, communicate, send_signal, terminate, kill."""

    def __init__(self, pid: int, control: socket.socket, out: int, err: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = None
        self.stdout = asyncio.StreamReader()
        self.stderr = asyncio.StreamReader()
        self._control = control
        self._pipes = (out, err)
        self._ended = asyncio.Event()

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        for fd, reader in zip(self._pipes, (self.stdout, self.stderr), strict=True):
            pipe = os.fdopen(fd, "rb", buffering=0)
            await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
        self._control.setblocking(False)
        loop.add_reader(self._control.fileno(), self._on_control)

    def _on_control(self) -> None:
        try:
            data = self._control.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.returncode = int(json.loads(data)["exit"])
        elif self.returncode is None:
            self.returncode = -signal.SIGKILL  # the zygote itself is gone
        asyncio.get_running_loop().remove_reader(self._control.fileno())
        self._control.close()
        self._ended.set()

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    async def communicate(self, input: bytes | None = None) -> tuple[bytes, bytes]:
        out, err = await asyncio.gather(self.stdout.read(), self.stderr.read())
        await self.wait()
        return out, err

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test process's zygote, started on first use."""

    def __init__(self) -> None:
        self._folder = tempfile.mkdtemp(prefix="newsletter-zygote-")
        self.path = os.path.join(self._folder, "zygote.sock")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [env.get("PYTHONPATH")])])
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"from support.zygote import serve; serve({self.path!r})"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            # Not the test's folder (a project): a test looks for what still works there.
            cwd=self._folder,
        )
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        assert ready == b"ready\n", f"the zygote did not start: {ready!r}"

    async def spawn(self, args: list[str], env: dict[str, str], cwd: Path) -> Forked:
        stdin = os.open(os.devnull, os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            control.connect(self.path)
            request = json.dumps({"args": args, "env": env, "cwd": str(cwd)}).encode()
            socket.send_fds(control, [request], [stdin, out_w, err_w])
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        pid = int(json.loads(control.recv(4096))["pid"])
        forked = Forked(pid, control, out_r, err_r)
        await forked._start()
        return forked


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`newsletter ARGS` forked from the zygote and waited for, as `subprocess.run(...,
    capture_output=True, text=True)` gives it (for a test with no event loop)."""

    async def forked() -> tuple[int, bytes, bytes]:
        proc = await zygote().spawn(args, env, cwd)
        out, err = await proc.communicate()
        return proc.returncode or 0, out, err

    code, out, err = asyncio.run(forked())
    return subprocess.CompletedProcess(
        ["newsletter", *args], code, out.decode("utf-8"), err.decode("utf-8")
    )


_zygotes: dict[int, Zygote] = {}


def zygote() -> Zygote:
    """This test process's zygote (a forked test process gets its own)."""
    found = _zygotes.get(os.getpid())
    if found is None:
        found = _zygotes[os.getpid()] = Zygote()
    return found


# -- the zygote's side ------------------------------------------------------------------------


def serve(path: str) -> None:
    """Import the tool, then fork a child per request on `path` until stdin closes."""
    _import_everything()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    waiting: dict[int, socket.socket] = {}
    watch = selectors.DefaultSelector()
    watch.register(listener, selectors.EVENT_READ, "request")
    watch.register(wake_r, selectors.EVENT_READ, "child")
    watch.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in watch.select():
            if key.data == "parent" and not os.read(sys.stdin.fileno(), 4096):
                return  # the test process is gone
            if key.data == "request":
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, _MESSAGE, 3)
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(message), fds)
                for fd in fds:
                    os.close(fd)
                connection.send(json.dumps({"pid": pid}).encode())
                waiting[pid] = connection
            if key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = waiting.pop(pid, None)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            connection.close()


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become `python -m newsletter ARGS` in its folder and environment."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import random
        import time

        time.tzset()
        random.seed()  # not the zygote's sequence, shared by every child
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"
        )
        sys.stdout = sys.__stdout__ = _writer(1, "strict", unbuffered, line=False)
        sys.stderr = sys.__stderr__ = _writer(2, "backslashreplace", unbuffered, line=True)
        sys.argv = ["newsletter", *request["args"]]
        from newsletter.cli.main import main

        main()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _writer(fd: int, errors: str, unbuffered: bool, *, line: bool) -> io.TextIOWrapper:
    """sys.stdout or sys.stderr as the interpreter makes them (unbuffered with
    PYTHONUNBUFFERED, as `python -u`: no buffer under the text layer)."""
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(
        raw if unbuffered else io.BufferedWriter(raw),  # type: ignore[arg-type]
        encoding="utf-8",
        errors=errors,
        line_buffering=line,
        write_through=unbuffered,
    )


def _import_everything() -> None:
    """Every module of the tool a command may import, and the libraries they import."""
    import importlib
    import pkgutil

    import newsletter

    for module in pkgutil.walk_packages(newsletter.__path__, "newsletter."):
        if module.name.endswith("__main__"):  # runs the command line
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(module.name)
