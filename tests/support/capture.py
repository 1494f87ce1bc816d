"""The real capture server (`newsletter mailbox`'s) on 127.0.0.1 port 0 in a thread, for tests
that are not async; mail to it from the standard library's SMTP client; and a listener that
counts every connection made to it (a remote image, font or page a message tried to load)."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import smtplib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from newsletter.send.mailbox import serve_mailbox
from support.sendcli import environment


@contextlib.contextmanager
def capture_server(project: Path) -> Iterator[int]:
    """The capture server storing into the project's .newsletter/mailbox; yields its port. Its
    loop runs in its own thread, started there: the thread calling this may hold a running loop
    (Playwright's sync API does)."""
    ready: queue.Queue[int | BaseException] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        try:
            server = await serve_mailbox(
                project / ".newsletter" / "mailbox", lambda _: None, "127.0.0.1", 0
            )
        except BaseException as exc:
            ready.put(exc)
            raise
        ready.put(server.sockets[0].getsockname()[1])
        while not stop.is_set():
            await asyncio.sleep(0.02)
        server.close()
        await server.wait_closed()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    port = ready.get(timeout=10)
    if isinstance(port, BaseException):
        raise port
    try:
        yield port
    finally:
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the capture server did not stop within 10 s"


def deliver(port: int, message: bytes, to: str = "reader@example.org") -> None:
    """Hand `message` to the capture server as anyone could: no account, any sender."""
    # A guard against a hang, not a measure: a loaded machine may take long over a big message.
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.sendmail("stranger@example.net", [to], message, mail_options=["SMTPUTF8"])


def send_test(project: Path, port: int) -> None:
    """`newsletter send --issue 14 --list staging` into the capture server, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--list", "staging"],
        cwd=project,
        env=environment(port),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


class Beacon:
    """A TCP listener on loopback that counts connections and notes each request line, answering
    nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self.requests: list[str] = []  # the first line of each, to name what leaked
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.connections += 1
            conn.settimeout(0.5)
            try:
                self.requests.append(conn.recv(200).split(b"\r\n", 1)[0].decode("latin-1"))
            except OSError:
                self.requests.append("(a connection, no request)")
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the thread
        self.sock.close()
        self._thread.join(5)


@contextlib.contextmanager
def beacon() -> Iterator[Beacon]:
    listening = Beacon()
    try:
        yield listening
    finally:
        listening.close()
