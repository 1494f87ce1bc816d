"""wire.Wire against real servers on loopback: replies kept in order, pipelining proven, and the
aiosmtplib API it takes the session over from."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiosmtplib
import pytest

from newsletter.config.settings import SmtpSettings
from newsletter.send.replies import Outcome
from newsletter.send.smtp import Pool
from newsletter.send.wire import Wire, stuffed
from support.smtp import FaultyHandler, Marks, make_message, send_one, start

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def test_the_aiosmtplib_api_the_take_over_uses_is_still_there() -> None:
    # If this fails, aiosmtplib changed what send/wire.py relies on: read its changelog, adapt
    # Wire.take_over, then move the version bound in pyproject.toml.
    assert "transport" in {*vars(aiosmtplib.SMTP()), *dir(aiosmtplib.SMTP)}
    assert inspect.iscoroutinefunction(aiosmtplib.SMTP.connect)
    assert callable(getattr(asyncio.WriteTransport, "set_protocol", None))


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[int]:
    """A real TCP server on loopback that greets, answers EHLO with PIPELINING, then runs
    `script` on the session."""

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 scripted ESMTP\r\n")
        await reader.readline()
        writer.write(b"250-scripted\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
        try:
            await script(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def lines(reader: asyncio.StreamReader, n: int) -> list[bytes]:
    return [await reader.readline() for _ in range(n)]


def settings(port: int, **kw: object) -> SmtpSettings:
    return SmtpSettings.model_validate(
        {"host": "127.0.0.1", "port": port, "security": "none", "timeout": 5, **kw}
    )


async def test_mail_rcpt_and_data_go_out_before_any_reply_when_the_server_pipelines() -> None:
    seen: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Not one reply until all three commands are in: a client that waits for the reply to
        # MAIL before sending RCPT would hang here (and the test time out).
        seen.extend(await asyncio.wait_for(lines(reader, 3), 5))
        # The three replies in one segment, a multi-line one among them.
        writer.write(b"250 ok\r\n250-fine\r\n250 2.1.5 ok\r\n354 go ahead\r\n")
        body = await reader.readuntil(b"\r\n.\r\n")
        seen.append(body)
        writer.write(b"250 2.0.0 queued as P1\r\n")
        seen.extend(await lines(reader, 1))
        writer.write(b"221 bye\r\n")

    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert (result.outcome, result.reply) == (Outcome.SENT, "2.0.0 queued as P1")
    assert seen[:3] == [
        b"MAIL FROM:<a@example.org>\r\n",
        b"RCPT TO:<r1@example.com>\r\n",
        b"DATA\r\n",
    ]
    assert seen[3].endswith(b"Hello.\r\n.\r\n")
    assert seen[4] == b"QUIT\r\n"


async def test_a_refused_recipient_with_a_354_anyway_gets_no_body() -> None:
    after: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        # Against RFC 2920: DATA accepted although no recipient was.
        writer.write(b"250 ok\r\n550 5.1.1 no such user\r\n354 go ahead\r\n")
        after.set_result(await reader.read(65536))

    marks = Marks()
    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), marks)
        await pool.close()
        rest = await asyncio.wait_for(after, 5)
    assert (result.outcome, result.code) == (Outcome.REJECTED, 550)
    assert marks.calls == 0  # never `sending`
    assert rest == b""  # the session was closed: no body, no QUIT into a body


async def test_the_next_envelope_goes_out_behind_the_body_in_one_write() -> None:
    """One round trip per message: the server hears the next MAIL, RCPT and DATA before it
    answers the body (a client that waits for that 250 first would hang here)."""
    seen: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        await reader.readuntil(b"\r\n.\r\n")
        seen.extend(await asyncio.wait_for(lines(reader, 3), 5))
        writer.write(b"250 queued P1\r\n250 ok\r\n250 ok\r\n354 go\r\n")
        seen.append(await reader.readuntil(b"\r\n.\r\n"))
        writer.write(b"250 queued P2\r\n")
        seen.extend(await lines(reader, 1))
        writer.write(b"221 bye\r\n")

    marks = Marks()
    second = make_message(2)
    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        first = await send_one(pool, make_message(1), marks, lambda: second)
        assert marks.calls == 1  # the second is not `sending` before its own 354
        result = await send_one(pool, second, marks)
        await pool.close()
    assert (first.reply, result.reply) == ("queued P1", "queued P2")
    assert marks.calls == 2
    assert seen[:3] == [
        b"MAIL FROM:<a@example.org>\r\n",
        b"RCPT TO:<r2@example.com>\r\n",
        b"DATA\r\n",
    ]
    assert b"Message-ID: <m2@test.example>" in seen[3]
    assert seen[4] == b"QUIT\r\n"


async def test_a_refused_body_ends_its_transaction_without_an_rset() -> None:
    """The reply to the end of the body ends the transaction; an RSET then would be read as
    the first line of the announced message's body."""
    seen: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        await reader.readuntil(b"\r\n.\r\n")
        await lines(reader, 3)
        writer.write(b"554 5.7.1 spam\r\n250 ok\r\n250 ok\r\n354 go\r\n")
        seen.append(await reader.readuntil(b"\r\n.\r\n"))
        writer.write(b"250 queued P2\r\n")
        await lines(reader, 1)

    second = make_message(2)
    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        first = await send_one(pool, make_message(1), Marks(), lambda: second)
        result = await send_one(pool, second, Marks())
        await pool.close()
    assert (first.outcome, first.code) == (Outcome.REJECTED, 554)
    assert result.outcome == Outcome.SENT
    assert seen[0].startswith(b"From: a@example.org\r\nTo: r2@example.com")


async def test_an_announced_message_not_sent_next_ends_its_session() -> None:
    """The server waits for the announced message's body: it gets none, nor a QUIT inside
    it; the message sent instead goes on a new session."""
    sessions: list[bytes] = []
    both = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        body = await reader.readuntil(b"\r\n.\r\n")
        writer.write(b"250 queued\r\n")
        if b"<m1@" in body:  # the second message's envelope follows it
            body += b"".join(await lines(reader, 3))
            writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        else:
            body += await reader.readline()
            writer.write(b"221 bye\r\n")
        sessions.append(body + await reader.read(65536))
        if len(sessions) == 2:
            both.set()

    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        first = await send_one(pool, make_message(1), Marks(), lambda: make_message(2))
        third = await send_one(pool, make_message(3), Marks())
        await pool.close()
        await asyncio.wait_for(both.wait(), 5)
    assert (first.outcome, third.outcome) == (Outcome.SENT, Outcome.SENT)
    assert len(sessions) == 2
    assert sessions[0].endswith(b"RCPT TO:<r2@example.com>\r\nDATA\r\n")  # then EOF
    assert b"<m3@test.example>" in sessions[1]
    assert sessions[1].endswith(b"\r\n.\r\nQUIT\r\n")


async def test_replies_split_anywhere_are_read_whole() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        for piece in (b"25", b"0 ok\r\n250-a\r", b"\n250 b\r\n3", b"54 go\r\n"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        await reader.readuntil(b"\r\n.\r\n")
        writer.write(b"250 done\r\n")
        await lines(reader, 1)

    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert (result.outcome, result.reply) == (Outcome.SENT, "done")


@pytest.mark.parametrize("garbage", [b"hello there\r\n", b"2500 ok\r\n", b"x" * 70000])
async def test_a_reply_that_is_not_smtp_ends_the_session_before_data(garbage: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(garbage)
        await reader.read(65536)

    marks = Marks()
    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), marks)
        await pool.close()
    assert result.outcome == Outcome.RETRY  # before the 354: the server cannot have it
    assert marks.calls == 0


async def test_a_server_that_hangs_after_354_is_unknown_after_the_timeout() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        await reader.read(1 << 20)
        await asyncio.sleep(5)

    async with scripted(script) as port:
        pool = Pool(settings(port, timeout=0.3), password=None, size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert result.outcome == Outcome.UNKNOWN
    assert "Timed out" in result.reply


async def test_without_pipelining_each_command_waits_for_its_reply() -> None:
    handler = FaultyHandler()
    handler.pipelining = False
    async with start(handler) as server:
        smtp = aiosmtplib.SMTP(hostname=server.host, port=server.port, start_tls=False)
        await smtp.connect()
        await smtp.ehlo()
        assert not smtp.supports_extension("pipelining")
        wire = Wire.take_over(smtp)
        wire.write(b"MAIL FROM:<a@example.org>\r\n")
        assert (await wire.reply()).code == 250
        wire.write(b"NOOP\r\n", b"NOOP\r\n")
        assert [(await wire.reply()).code, (await wire.reply()).code] == [250, 250]
        wire.write(b"QUIT\r\n")
        assert (await wire.reply()).code == 221
        wire.close()


def test_stuffing_makes_crlf_line_ends_and_doubles_leading_dots() -> None:
    assert stuffed(b".a\nb\r.c\r\n..d") == b"..a\r\nb\r\n..c\r\n...d\r\n"
    assert stuffed(b"plain\r\n") == b"plain\r\n"


async def endless(writer: asyncio.StreamWriter, line: bytes) -> None:
    """`line` written for ever (until the client hangs up), as fast as the client reads."""
    chunk = line * 256
    try:
        while True:
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass


# issue 18.4: the wire capped only an unfinished line, so a reply that never ended grew without
# limit (0.9 to 4 GB in 12 s), until the command timeout, if ever.
@pytest.mark.parametrize(
    "line", [b"250-more to come\r\n", b"250-" + b"x" * 1000 + b"\r\n"], ids=["short", "long"]
)
async def test_an_endless_reply_before_the_354_is_a_connection_fault_and_a_retry(
    line: bytes,
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        await endless(writer, line)

    marks = Marks()
    async with scripted(script) as port:
        # A long command timeout: only the cap ends the reply, at once.
        pool = Pool(settings(port, timeout=60), password=None, size=1)
        result = await asyncio.wait_for(send_one(pool, make_message(1), marks), 10)
        await pool.close()
    assert (result.outcome, result.code) == (Outcome.RETRY, None)
    assert "a reply over 100 lines or 32768 bytes" in result.reply
    assert marks.calls == 0  # never `sending`


async def test_an_endless_reply_to_the_body_is_unknown() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n250 ok\r\n354 go\r\n")
        await reader.readuntil(b"\r\n.\r\n")
        await endless(writer, b"250-queued, and more\r\n")

    marks = Marks()
    async with scripted(script) as port:
        pool = Pool(settings(port, timeout=60), password=None, size=1)
        result = await asyncio.wait_for(send_one(pool, make_message(1), marks), 10)
        await pool.close()
    assert (result.outcome, marks.calls) == (Outcome.UNKNOWN, 1)  # the server may have it
    assert "a reply over 100 lines" in result.reply


async def test_replies_to_commands_never_sent_are_a_connection_fault() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        await endless(writer, b"250 ok\r\n")

    async with scripted(script) as port:
        pool = Pool(settings(port, timeout=60), password=None, size=1)
        result = await asyncio.wait_for(send_one(pool, make_message(1), Marks()), 10)
        await pool.close()
    # Which reply answers which command is lost: none counts, and no 354 was heard.
    assert (result.outcome, result.code) == (Outcome.RETRY, None)
    assert "over 16 replies to commands never sent" in result.reply


async def test_a_reply_at_the_caps_is_read_whole() -> None:
    """100 lines and 32 KB: as much as a real server could want, no more refused."""
    long = b"".join(b"250-" + b"y" * 300 + b"\r\n" for _ in range(99))

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n" + long + b"250 fine\r\n354 go\r\n")
        await reader.readuntil(b"\r\n.\r\n")
        writer.write(b"250 done\r\n")
        await lines(reader, 1)

    assert len(long) < 32768
    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert (result.outcome, result.reply) == (Outcome.SENT, "done")


# issue 18.2: a reply that is not UTF-8 was decoded with surrogateescape, and storing or
# printing it raised UnicodeEncodeError.
@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"550 5.1.1 Empf\xe4nger unbekannt", "5.1.1 Empf\ufffdnger unbekannt"),
        (b"550 5.1.1 \x9b31m\x9d0;x\x9c", "5.1.1 \ufffd31m\ufffd0;x\ufffd"),
        (b"550 5.1.1 a\x00b", "5.1.1 a\ufffdb"),
        (b"550-5.1.1 \xff\r\n550 5.1.1 ok", "5.1.1 \ufffd\n5.1.1 ok"),
        ("550 5.1.1 收件人不存在".encode(), "5.1.1 收件人不存在"),
    ],
)
async def test_a_reply_that_is_not_utf8_is_decoded_with_replacement(raw: bytes, text: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await lines(reader, 3)
        writer.write(b"250 ok\r\n" + raw + b"\r\n503 no recipient\r\n")
        await lines(reader, 1)  # RSET
        writer.write(b"250 ok\r\n")
        await lines(reader, 1)

    async with scripted(script) as port:
        pool = Pool(settings(port), password=None, size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert (result.outcome, result.code, result.reply) == (Outcome.REJECTED, 550, text)
    result.reply.encode("utf-8")  # storable and printable as it is
