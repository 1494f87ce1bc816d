"""Another program's SMTP server (aiosmtpd) holding a port on 127.0.0.1, in a thread: what the
capture server and `make demo` meet when the port they want is taken. It counts every
connection made to it and keeps every envelope it is handed, so a test can show it got nothing."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session


@dataclass
class Bystander:
    port: int = 0
    connections: int = 0
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)


class _Handler:
    def __init__(self, seen: Bystander) -> None:
        self.seen = seen

    async def handle_DATA(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        self.seen.envelopes.append((envelope.mail_from or "", list(envelope.rcpt_tos)))
        return "250 OK"


@contextlib.contextmanager
def other_smtp_server() -> Iterator[Bystander]:
    """A real SMTP server on 127.0.0.1, a free port, until the block ends."""
    seen = Bystander()
    handler = _Handler(seen)
    ready: queue.Queue[int | BaseException] = queue.Queue()
    stop = threading.Event()

    class Counted(SMTP):
        def connection_made(self, transport: Any) -> None:
            seen.connections += 1
            super().connection_made(transport)

    async def serve() -> None:
        try:
            loop = asyncio.get_running_loop()
            server = await loop.create_server(lambda: Counted(handler), "127.0.0.1", 0)
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
    seen.port = port
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)
