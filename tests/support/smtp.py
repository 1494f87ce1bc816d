"""Real SMTP servers for tests: aiosmtpd on 127.0.0.1, port 0, failing on purpose where told.

`FaultyHandler` counts every accepted message by Message-ID (so a test can prove nobody got two
copies) and applies `Fault`s: reply with a code to the greeting, EHLO, RCPT, DATA or the end of
the body, sleep, hold the reply until the test lets it go, or drop the connection mid-DATA (after
storing the message or not). `start` runs it in the current event loop, optionally behind
implicit TLS or STARTTLS and AUTH. `dialogue` is a raw asyncio server for what aiosmtpd will
not do (a greeting or a reply that is not SMTP, a server that says nothing).
`python tests/support/smtp.py PORTFILE LOG` runs a counting server in its own process for the
crash tests.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import inspect
import ssl
import sys
import time
import warnings
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from newsletter.models import OutgoingMessage
from newsletter.send.replies import Result
from newsletter.send.smtp import Meanwhile, Pool
from newsletter.send.smtp import Session as ClientSession

_HEADERS = email.parser.BytesHeaderParser(policy=email.policy.compat32)


@dataclass
class Fault:
    """What to do to recipients `match` picks, `times` times each (then behave)."""

    # "greeting", "ehlo" (matched against the session's number, "1" for the first), "rcpt",
    # "data-command" (before its 354) or "data" (after the body)
    stage: str
    # e.g. "451 4.2.0 try later"; bytes go out as they are (a hostile or non-UTF-8 server)
    reply: str | bytes | None = None
    sleep: float = 0.0
    hold: asyncio.Event | None = None  # no reply until the test sets it (`used` says it is held)
    drop: bool = False  # close the connection without a reply
    store_before_drop: bool = False  # the in-doubt case: kept, but the client never hears
    times: int = 10**9
    match: Callable[[str], bool] = lambda _: True
    used: Counter[str] = field(default_factory=Counter)

    def applies(self, stage: str, recipient: str) -> bool:
        if stage != self.stage or not self.match(recipient) or self.used[recipient] >= self.times:
            return False
        self.used[recipient] += 1
        return True


@dataclass
class Received:
    message_id: str
    recipients: list[str]
    data: bytes
    at: float


class FaultyHandler:
    # aiosmtpd reads pipelined commands correctly but does not say so; ours do, unless told.
    pipelining = True

    def __init__(self, faults: list[Fault] | None = None) -> None:
        self.faults = faults or []
        self.received: list[Received] = []
        self.by_message_id: Counter[str] = Counter()
        self.by_recipient: Counter[str] = Counter()
        self.sessions = 0
        self.connections = 0
        self.log: Path | None = None

    async def handle_EHLO(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope, hostname: str, responses: Any
    ) -> Any:
        self.sessions += 1
        session.host_name = hostname
        if self.pipelining:
            responses.insert(-1, "250-PIPELINING")
        return responses

    async def handle_RCPT(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str | bytes:
        for fault in self.faults:
            if fault.applies("rcpt", address):
                if fault.sleep:
                    await asyncio.sleep(fault.sleep)
                if fault.hold is not None:
                    await fault.hold.wait()
                if fault.drop:
                    assert server.transport is not None
                    server.transport.close()
                    return "421 gone"
                if fault.reply:
                    return fault.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str | bytes:
        for fault in self.faults:
            if any(fault.applies("data", r) for r in envelope.rcpt_tos):
                if fault.sleep:
                    await asyncio.sleep(fault.sleep)
                if fault.hold is not None:
                    await fault.hold.wait()
                if fault.drop:
                    if fault.store_before_drop:
                        self._store(envelope)
                    assert server.transport is not None
                    server.transport.abort()
                    return "250 never heard"
                if fault.reply:
                    return fault.reply
        n = self._store(envelope)
        return f"250 2.0.0 Ok: queued as Q{n}"

    def _store(self, envelope: Envelope) -> int:
        data = envelope.original_content or b""
        message_id = str(_HEADERS.parsebytes(data).get("Message-ID", "")).strip()
        self.received.append(Received(message_id, list(envelope.rcpt_tos), data, time.time()))
        self.by_message_id[message_id] += 1
        for rcpt in envelope.rcpt_tos:
            self.by_recipient[rcpt.lower()] += 1
        if self.log is not None:
            with self.log.open("a") as fh:
                fh.write(f"{message_id} {' '.join(envelope.rcpt_tos)}\n")
        return len(self.received)


class _SMTP(SMTP):
    """aiosmtpd with more places to fail: the greeting, EHLO, and the DATA command itself,
    before the 354 reply."""

    number = 0  # this session's, counted from 1 as the server accepted them

    def _session_fault(self, stage: str) -> Fault | None:
        handler = self.event_handler
        faults = handler.faults if isinstance(handler, FaultyHandler) else []
        return next((f for f in faults if f.applies(stage, str(self.number))), None)

    async def _handle_client(self) -> None:
        fault = self._session_fault("greeting")
        if fault is None:
            await super()._handle_client()
            return
        if fault.reply:
            await self.push(fault.reply)
        assert self.transport is not None
        self.transport.close()

    async def smtp_EHLO(self, hostname: str) -> None:  # noqa: N802 (aiosmtpd's method name)
        fault = self._session_fault("ehlo")
        if fault is None:
            await super().smtp_EHLO(hostname)
        elif fault.drop:
            assert self.transport is not None
            self.transport.close()
        elif fault.reply:
            await self.push(fault.reply)

    async def smtp_DATA(self, arg: str) -> None:  # noqa: N802 (aiosmtpd's method name)
        handler = self.event_handler
        recipients = self.envelope.rcpt_tos if self.envelope is not None else []
        for fault in handler.faults if isinstance(handler, FaultyHandler) else []:
            if any(fault.applies("data-command", r) for r in recipients):
                if fault.sleep:
                    await asyncio.sleep(fault.sleep)
                if fault.drop:
                    assert self.transport is not None
                    self.transport.close()
                    return
                if fault.reply:
                    await self.push(fault.reply)
                    return
        await super().smtp_DATA(arg)


class Authenticator:
    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()
        self.tries = 0

    def __call__(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        self.tries += 1
        ok = (
            isinstance(data, LoginPassword)
            and data.login == self.user
            and data.password == self.password
        )
        return AuthResult(success=ok, handled=False)


@dataclass
class Server:
    handler: FaultyHandler
    host: str
    port: int


@asynccontextmanager
async def start(
    handler: FaultyHandler,
    *,
    tls: ssl.SSLContext | None = None,
    starttls: ssl.SSLContext | None = None,
    auth: Authenticator | None = None,
    smtputf8: bool = True,
) -> AsyncIterator[Server]:
    loop = asyncio.get_running_loop()
    sessions: list[SMTP] = []

    def factory() -> SMTP:
        with warnings.catch_warnings():
            # Implicit TLS is encrypted, but aiosmtpd cannot tell and warns about AUTH.
            warnings.simplefilter("ignore", UserWarning)
            return make()

    def make() -> SMTP:
        smtp = _SMTP(
            handler,
            hostname="test.smtp",
            enable_SMTPUTF8=smtputf8,
            tls_context=starttls,
            require_starttls=starttls is not None,
            authenticator=auth,
            auth_required=auth is not None,
            auth_require_tls=starttls is not None,  # aiosmtpd cannot tell implicit TLS
        )
        sessions.append(smtp)
        handler.connections += 1
        smtp.number = handler.connections
        return smtp

    server = await loop.create_server(factory, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Server(handler, "127.0.0.1", port)
    finally:
        server.close()
        for smtp in sessions:
            if smtp.transport is not None:
                smtp.transport.abort()
        await server.wait_closed()


Answer = bytes | Callable[[asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def dialogue(greeting: bytes | None, answers: dict[bytes, Answer]) -> AsyncIterator[int]:
    """A real TCP server on loopback: `greeting` (None: never a word), then each command
    answered by its first word (`answers[b"EHLO"]`: bytes, or a coroutine that writes the
    answer), 250 otherwise. Yields its port."""

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if greeting is None:
                await reader.read()
                return
            writer.write(greeting)
            while line := await reader.readline():
                answer = answers.get(
                    line.split()[0].upper() if line.split() else b"", b"250 ok\r\n"
                )
                if isinstance(answer, bytes):
                    writer.write(answer)
                    await writer.drain()
                else:
                    await answer(writer)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def _main(portfile: Path, log: Path, delay: float) -> None:
    handler = FaultyHandler([Fault("data", sleep=delay)] if delay else [])
    handler.log = log
    async with start(handler) as server:
        portfile.write_text(str(server.port))
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])))


# -- messages and marks for driving the client directly ----------------------------------------


def make_message(
    n: int = 1, recipient: str | None = None, body: bytes = b"Hello.\r\n"
) -> OutgoingMessage:
    mid = f"<m{n}@test.example>"
    rcpt = recipient or f"r{n}@example.com"
    data = (
        f"From: a@example.org\r\nTo: {rcpt}\r\nSubject: t{n}\r\nMessage-ID: {mid}\r\n\r\n".encode()
        + body
    )
    return OutgoingMessage(message_id=mid, sender="a@example.org", recipient=rcpt, data=data)


class Marks:
    """An `on_accepted` that counts its calls (the engine commits `sending` there)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


_free: weakref.WeakKeyDictionary[Pool, asyncio.Queue[ClientSession]] = weakref.WeakKeyDictionary()


async def send_one(
    pool: Pool,
    message: OutgoingMessage,
    on_accepted: Callable[[], object],
    meanwhile: Meanwhile = None,
) -> Result:
    """One message on the first free session of `pool`, for driving the client without the
    engine (which keeps a task per session); `on_accepted` may be a plain function."""
    if pool not in _free:
        _free[pool] = asyncio.Queue()
        for session in pool.sessions:
            _free[pool].put_nowait(session)

    async def accepted() -> None:
        outcome = on_accepted()
        if inspect.isawaitable(outcome):
            await outcome

    session = await _free[pool].get()
    try:
        return await session.send(message, accepted, meanwhile)
    finally:
        _free[pool].put_nowait(session)
