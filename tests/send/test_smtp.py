"""smtp.Pool against real aiosmtpd servers: sessions reconnected and recycled after what they
met, marks, TLS and AUTH that work; every test once with the server offering PIPELINING and
once without. (What each fault maps to, stage by stage, is test_faults.py's table.)"""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import pytest
import trustme
from pydantic import SecretStr

from newsletter.config.settings import SmtpSettings
from newsletter.errors import TransportError
from newsletter.send.replies import Outcome, Scope
from newsletter.send.smtp import Pool
from support.smtp import (
    Authenticator,
    Fault,
    FaultyHandler,
    Marks,
    Server,
    make_message,
    send_one,
    start,
)


@pytest.fixture(autouse=True, params=[True, False], ids=["pipelined", "one-by-one"])
def pipelining(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(FaultyHandler, "pipelining", request.param)
    return bool(request.param)


def plain(server: Server, **kw: object) -> SmtpSettings:
    return SmtpSettings.model_validate(
        {"host": server.host, "port": server.port, "security": "none", **kw}
    )


async def test_body_arrives_exactly_whether_or_not_the_builder_vouched_for_it() -> None:
    handler = FaultyHandler()
    body = b".leading dot\r\n..two\r\nbare LF\nend\r\n."
    odd = make_message(1, body=body)
    ready = make_message(2, body=b"line one\r\nline two\r\n").model_copy(
        update={"smtp_ready": True}
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        results = [await send_one(pool, m, Marks()) for m in (odd, ready)]
        await pool.close()
    assert [r.outcome for r in results] == [Outcome.SENT, Outcome.SENT]
    got = {r.message_id: r.data for r in handler.received}
    # Dot-stuffing is undone by the server; the bare LF reaches it as a line end (CRLF).
    assert got["<m1@test.example>"].endswith(b".leading dot\r\n..two\r\nbare LF\r\nend\r\n.\r\n")
    assert got["<m2@test.example>"] == ready.data


async def test_meanwhile_runs_after_the_354_is_committed_and_only_then() -> None:
    handler = FaultyHandler(
        [Fault("rcpt", reply="550 5.1.1 no such user", match=lambda r: r.startswith("r1@"))]
    )
    calls: list[str] = []
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        refused = await send_one(
            pool,
            make_message(1),
            lambda: calls.append("accepted"),
            lambda: calls.append("meanwhile"),
        )
        sent = await send_one(
            pool,
            make_message(2),
            lambda: calls.append("accepted"),
            lambda: calls.append("meanwhile"),
        )
        await pool.close()
    assert (refused.outcome, sent.outcome) == (Outcome.REJECTED, Outcome.SENT)
    # Not for a message refused before DATA; after `sending` was committed for one uploaded.
    assert calls == ["accepted", "meanwhile"]


async def test_sends_and_returns_the_queue_id() -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=2)
        marks = Marks()
        result = await send_one(pool, make_message(1), marks)
        await pool.close()
    assert result.outcome == Outcome.SENT
    assert result.code == 250
    assert "queued as Q1" in result.reply
    assert marks.calls == 1
    assert handler.by_message_id == {"<m1@test.example>": 1}


async def test_recipient_4xx_is_deferred_and_5xx_rejected_without_data() -> None:
    handler = FaultyHandler(
        [
            Fault("rcpt", reply="451 4.2.0 mailbox busy", match=lambda r: r.startswith("r1@")),
            Fault("rcpt", reply="550 5.1.1 no such user", match=lambda r: r.startswith("r2@")),
        ]
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        marks = Marks()
        deferred = await send_one(pool, make_message(1), marks)
        rejected = await send_one(pool, make_message(2), marks)
        sent = await send_one(pool, make_message(3), marks)
        await pool.close()
    assert (deferred.outcome, deferred.scope, deferred.code) == (
        Outcome.DEFERRED,
        Scope.RECIPIENT,
        451,
    )
    assert (rejected.outcome, rejected.code) == (Outcome.REJECTED, 550)
    assert "no such user" in rejected.reply
    assert sent.outcome == Outcome.SENT
    # `sending` is only ever marked for the message whose RCPT was accepted.
    assert marks.calls == 1
    assert handler.by_message_id == {"<m3@test.example>": 1}


async def test_data_5xx_is_rejected_and_4xx_deferred() -> None:
    handler = FaultyHandler(
        [
            Fault("data", reply="554 5.7.1 spam", match=lambda r: r.startswith("r1@")),
            Fault("data", reply="452 4.3.1 full", match=lambda r: r.startswith("r2@")),
        ]
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        first = await send_one(pool, make_message(1), Marks())
        second = await send_one(pool, make_message(2), Marks())
        third = await send_one(pool, make_message(3), Marks())
        await pool.close()
    assert (first.outcome, first.code) == (Outcome.REJECTED, 554)
    assert (second.outcome, second.code) == (Outcome.DEFERRED, 452)
    assert third.outcome == Outcome.SENT


async def test_421_at_rcpt_reconnects_and_the_next_message_goes_out() -> None:
    handler = FaultyHandler(
        [Fault("rcpt", reply="421 4.7.0 closing", match=lambda r: r.startswith("r1@"))]
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        first = await send_one(pool, make_message(1), Marks())
        second = await send_one(pool, make_message(2), Marks())
        await pool.close()
    assert (first.outcome, first.scope, first.code) == (Outcome.RETRY, Scope.CONNECTION, 421)
    assert second.outcome == Outcome.SENT
    assert handler.sessions == 2


async def test_drop_mid_data_is_unknown_and_the_pool_reconnects() -> None:
    handler = FaultyHandler(
        [Fault("data", drop=True, store_before_drop=True, match=lambda r: r.startswith("r1@"))]
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        marks = Marks()
        first = await send_one(pool, make_message(1), marks)
        second = await send_one(pool, make_message(2), marks)
        await pool.close()
    assert (first.outcome, first.scope) == (Outcome.UNKNOWN, Scope.CONNECTION)
    assert second.outcome == Outcome.SENT
    assert marks.calls == 2
    assert handler.sessions == 2


async def test_a_drop_on_the_data_command_before_354_is_a_retry_not_unknown() -> None:
    # issue 13.6: the server closed on DATA, never got the message, and the row was `unknown`.
    handler = FaultyHandler(
        [Fault("data-command", drop=True, times=1, match=lambda r: r.startswith("r1@"))]
    )
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        marks = Marks()
        first = await send_one(pool, make_message(1), marks)
        assert marks.calls == 0  # the in-doubt window never opened
        again = await send_one(pool, make_message(1), marks)
        await pool.close()
    assert (first.outcome, first.scope) == (Outcome.RETRY, Scope.CONNECTION)
    assert first.reply.startswith("connection lost before DATA's 354")
    assert again.outcome == Outcome.SENT
    assert marks.calls == 1
    assert handler.by_recipient == {"r1@example.com": 1}


async def test_a_reply_to_the_data_command_is_the_servers_decision() -> None:
    handler = FaultyHandler([Fault("data-command", reply="451 4.3.0 not now", times=1)])
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        marks = Marks()
        result = await send_one(pool, make_message(1), marks)
        await pool.close()
    assert (result.outcome, result.code) == (Outcome.DEFERRED, 451)
    assert marks.calls == 0


async def test_slow_rcpt_times_out_before_data_so_it_is_retry_not_unknown() -> None:
    handler = FaultyHandler([Fault("rcpt", sleep=1.0, match=lambda r: r.startswith("r1@"))])
    async with start(handler) as server:
        pool = Pool(plain(server, timeout=0.3), password=None, size=1)
        marks = Marks()
        first = await send_one(pool, make_message(1), marks)
        second = await send_one(pool, make_message(2), marks)
        await pool.close()
    assert first.outcome == Outcome.RETRY
    assert "connection lost before DATA's 354: Timed out waiting for server response" in first.reply
    assert marks.calls == 1
    assert second.outcome == Outcome.SENT


async def test_slow_data_times_out_as_unknown() -> None:
    # The server holds its reply to the body until the test lets it go: an answer while it
    # is held can only be the client's 0.3 s timeout.
    reply = asyncio.Event()
    handler = FaultyHandler([Fault("data", hold=reply, times=1)])
    async with start(handler) as server:
        pool = Pool(plain(server, timeout=0.3), password=None, size=1)
        started = time.monotonic()
        result = await send_one(pool, make_message(1), Marks())
        waited = time.monotonic() - started
        assert not reply.is_set()
        reply.set()
        await pool.close()
    assert result.outcome == Outcome.UNKNOWN
    assert "Timed out" in result.reply
    assert waited >= 0.3  # it waited for its timeout, not less


async def test_recycles_after_messages_per_connection() -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        pool = Pool(plain(server, messages_per_connection=3), password=None, size=1)
        for n in range(7):
            assert (await send_one(pool, make_message(n), Marks())).outcome == Outcome.SENT
        await pool.close()
    assert handler.sessions == 3


async def test_pool_runs_sessions_concurrently() -> None:
    # Every upload's reply is held until all four bodies are in: in series, the second
    # would never start, and the wait below would fail.
    replies = asyncio.Event()
    uploads = Fault("data", hold=replies)
    handler = FaultyHandler([uploads])
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=4)
        sending = asyncio.gather(*(send_one(pool, make_message(n), Marks()) for n in range(4)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # only against a hang
        while sum(uploads.used.values()) < 4:
            assert loop.time() < deadline, f"{sum(uploads.used.values())} of 4 uploads open"
            await asyncio.sleep(0.01)
        replies.set()
        results = await sending
        await pool.close()
    assert all(r.outcome == Outcome.SENT for r in results)
    assert handler.sessions == 4


async def test_non_ascii_recipient_needs_smtputf8() -> None:
    handler = FaultyHandler()
    async with start(handler, smtputf8=False) as server:
        pool = Pool(plain(server), password=None, size=1)
        result = await send_one(pool, make_message(1, recipient="王@example.com"), Marks())
        await pool.close()
    assert result.outcome == Outcome.FAILED
    assert "SMTPUTF8" in result.reply
    handler = FaultyHandler()
    async with start(handler, smtputf8=True) as server:
        pool = Pool(plain(server), password=None, size=1)
        result = await send_one(pool, make_message(1, recipient="王@example.com"), Marks())
        await pool.close()
    assert result.outcome == Outcome.SENT
    assert handler.by_recipient["王@example.com"] == 1


# -- TLS and AUTH -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server_tls(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    return ctx


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


async def test_starttls_with_auth(server_tls: ssl.SSLContext, ca_file: Path) -> None:
    handler = FaultyHandler()
    auth = Authenticator("news", "s3cret")
    async with start(handler, starttls=server_tls, auth=auth) as server:
        settings = plain(server, security="starttls", username="news", ca_file=ca_file)
        pool = Pool(settings, password=SecretStr("s3cret"), size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert result.outcome == Outcome.SENT
    assert auth.tries == 1
    assert "s3cret" not in repr(pool)


async def test_implicit_tls_with_auth(server_tls: ssl.SSLContext, ca_file: Path) -> None:
    handler = FaultyHandler()
    auth = Authenticator("news", "s3cret")
    async with start(handler, tls=server_tls, auth=auth) as server:
        settings = plain(server, security="tls", username="news", ca_file=ca_file)
        pool = Pool(settings, password=SecretStr("s3cret"), size=1)
        result = await send_one(pool, make_message(1), Marks())
        await pool.close()
    assert result.outcome == Outcome.SENT, result
    assert handler.by_message_id["<m1@test.example>"] == 1


def test_username_without_password_is_refused_up_front() -> None:
    settings = SmtpSettings(host="127.0.0.1", port=2525, security="none", username="news")
    with pytest.raises(TransportError, match="NEWSLETTER_SMTP_PASSWORD"):
        Pool(settings, password=None, size=1)


async def test_an_envelope_address_that_could_inject_is_refused_not_sent() -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        pool = Pool(plain(server), password=None, size=1)
        marks = Marks()
        bad = make_message(1, recipient="a@example.com> NOTIFY=NEVER <b@example.com")
        result = await send_one(pool, bad, marks)
        after = await send_one(pool, make_message(2), marks)
        await pool.close()
    assert result.outcome == Outcome.FAILED
    assert "unsafe envelope address" in result.reply
    assert after.outcome == Outcome.SENT
    assert marks.calls == 1
    assert list(handler.by_recipient) == ["r2@example.com"]
