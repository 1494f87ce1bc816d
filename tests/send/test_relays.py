"""Several relays against real aiosmtpd servers and a real outbox (SQLite and PostgreSQL): a
relay that refuses is set aside and its mail goes through the next, routes by recipient domain,
and a row in doubt on one relay is never sent through another."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from newsletter.config.settings import SmtpSettings
from newsletter.database import Database
from newsletter.models import DeliveryStatus as S
from newsletter.models import OutgoingMessage, Subscriber
from newsletter.send.job import Job, Options
from newsletter.send.relays import Board
from newsletter.send.replies import Outcome, Result, Scope
from newsletter.send.smtp import Pool
from support.database import Listing, deliver
from support.smtp import Authenticator, Fault, FaultyHandler, start

FAST = Options(concurrency=3, retry_base=0.01, retry_cap=0.05, breaker_threshold=5)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that refuses connections: bound (so nobody else takes it) and
    never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


def build(sub: Subscriber, stored: str | None = None, row_id: int = 0) -> OutgoingMessage:
    mid = stored or f"<{row_id}.{sub.envelope}>"
    data = (
        f"From: news@example.org\r\nTo: {sub.envelope}\r\nSubject: Issue 14\r\n"
        f"Message-ID: {mid}\r\n\r\nHello\r\n"
    ).encode()
    return OutgoingMessage(
        message_id=mid, sender="news@example.org", recipient=sub.envelope, data=data
    )


def job(addresses: list[str]) -> Job:
    listing = Listing(lambda: [Subscriber(envelope=a) for a in addresses])
    return Job(issue=14, list_name="main", subscribers=listing, build=build)


def readers(n: int, domain: str = "example.com") -> list[str]:
    return [f"r{i}@{domain}" for i in range(n)]


def relay(port: int, **kw: Any) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "security": "none", **kw}


def pool(primary: int, relays: dict[str, dict[str, Any]], size: int = 3, **kw: Any) -> Pool:
    smtp = SmtpSettings.model_validate({**relay(primary), "timeout": 30, "relays": relays, **kw})
    return Pool(smtp, password=None, size=size)


def relays_of_rows(database: Database) -> dict[str, str]:
    return {r.recipient: r.relay for r in database.deliveries.rows(14, "main")}


async def test_a_refusing_primary_every_reader_one_copy_through_the_backup(
    database: Database, closed_port: int
) -> None:
    handler = FaultyHandler()
    async with start(handler) as backup:
        report = await deliver(
            job(readers(20)), pool(closed_port, {"backup": relay(backup.port)}), database, FAST
        )
    assert report.complete, report.stopped
    assert sorted(handler.by_recipient.values()) == [1] * 20
    assert set(handler.by_message_id.values()) == {1}
    assert set(relays_of_rows(database).values()) == {"backup"}
    assert database.deliveries.by_relay(14, "main") == {"backup": {S.SENT: 20}}


async def test_a_primary_that_says_421_at_its_greeting_is_set_aside(database: Database) -> None:
    refusing = FaultyHandler([Fault("greeting", reply="421 4.3.2 not now")])
    handler = FaultyHandler()
    async with start(refusing) as primary, start(handler) as backup:
        the_pool = pool(primary.port, {"backup": relay(backup.port)}, set_aside_after=2)
        report = await deliver(job(readers(30)), the_pool, database, FAST)
    assert report.complete, report.stopped
    assert sorted(handler.by_recipient.values()) == [1] * 30
    assert refusing.received == []
    # Set aside after two refusals: the other 28 messages never knocked on the primary again
    # (each of the three sessions may have tried it once before it was set aside).
    assert refusing.connections <= 3
    assert the_pool.board.aside() == {"primary": the_pool.board.relays[0].why}
    assert "421" in the_pool.board.relays[0].why


async def test_a_relay_that_refuses_our_password_is_set_aside_at_once(database: Database) -> None:
    guarded = FaultyHandler()
    handler = FaultyHandler()
    auth = Authenticator("news", "right")
    async with start(guarded, auth=auth) as primary, start(handler) as backup:
        smtp = SmtpSettings.model_validate(
            {**relay(primary.port, username="news"), "relays": {"backup": relay(backup.port)}}
        )
        the_pool = Pool(smtp, password=SecretStr("wrong"), size=2)
        report = await deliver(job(readers(10)), the_pool, database, FAST)
    assert report.complete, report.stopped
    assert guarded.received == []
    assert sorted(handler.by_recipient.values()) == [1] * 10
    assert "AUTH refused" in the_pool.board.aside()["primary"]


async def test_a_route_sends_its_domain_through_its_relay(database: Database) -> None:
    main, microsoft = FaultyHandler(), FaultyHandler()
    async with start(main) as primary, start(microsoft) as ms:
        routes = {"ms": relay(ms.port, domains=["outlook.com", "Hotmail.com."])}
        addresses = readers(6) + readers(4, "outlook.com") + readers(3, "hotmail.com")
        report = await deliver(job(addresses), pool(primary.port, routes), database, FAST)
    assert report.complete, report.stopped
    assert sorted(microsoft.by_recipient) == sorted(
        readers(4, "outlook.com") + readers(3, "hotmail.com")
    )
    assert sorted(main.by_recipient) == readers(6)
    assert database.deliveries.by_relay(14, "main") == {"ms": {S.SENT: 7}, "primary": {S.SENT: 6}}


async def test_a_routed_relay_that_is_down_hands_its_domain_to_the_order(
    database: Database, closed_port: int
) -> None:
    main = FaultyHandler()
    async with start(main) as primary:
        routes = {"ms": relay(closed_port, domains=["outlook.com"])}
        addresses = readers(3) + readers(5, "outlook.com")
        report = await deliver(job(addresses), pool(primary.port, routes), database, FAST)
    assert report.complete, report.stopped
    assert sorted(main.by_recipient.values()) == [1] * 8


@pytest.mark.slow
@pytest.mark.parametrize("drop", ["data", "rcpt"])
async def test_a_row_in_doubt_is_never_sent_through_another_relay(
    database: Database, drop: str
) -> None:
    """The primary drops the connection after r2's body (it kept the message: the in-doubt
    case): r2 stays `unknown` on the primary and the backup never sees it. A drop at RCPT (no
    354, nothing in doubt) is the contrast: that message goes through the backup at once."""
    fault = Fault(drop, drop=True, store_before_drop=True, match=lambda r: r == "r2@example.com")
    first, second = FaultyHandler([fault]), FaultyHandler()
    async with start(first) as primary, start(second) as backup:
        report = await deliver(
            job(readers(6)), pool(primary.port, {"backup": relay(backup.port)}), database, FAST
        )
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    if drop == "data":
        assert rows["r2@example.com"].state == S.UNKNOWN
        assert rows["r2@example.com"].relay == "primary"
        assert "r2@example.com" not in second.by_recipient
        assert first.by_recipient["r2@example.com"] == 1
        assert report.counts[S.SENT] == 5
    else:
        assert report.complete, report.stopped
        assert rows["r2@example.com"].relay == "backup"
        assert second.by_recipient["r2@example.com"] == 1
        assert "r2@example.com" not in first.by_recipient
    total = Counter(first.by_recipient) + Counter(second.by_recipient)
    assert set(total.values()) == {1}


async def test_every_relay_down_stops_the_run_as_one_relay_did(
    database: Database, closed_port: int
) -> None:
    handler = FaultyHandler([Fault("greeting", reply="421 4.3.2 not now")])
    async with start(handler) as other:
        the_pool = pool(closed_port, {"backup": relay(other.port)})
        report = await deliver(job(readers(10)), the_pool, database, FAST)
    assert "circuit breaker" in report.stopped
    assert report.counts[S.SENT] == 0
    assert report.counts[S.UNKNOWN] == 0


def test_a_relay_set_aside_comes_back_after_its_while() -> None:
    now = [100.0]
    smtp = SmtpSettings.model_validate(
        {**relay(1), "relays": {"backup": relay(2)}, "set_aside_after": 2, "set_aside": "5m"}
    )
    board = Pool(smtp, password=None, size=1, clock=lambda: now[0]).board
    primary, _ = board.relays
    refused = Result(Outcome.RETRY, Scope.CONNECTION, 421, "busy")
    assert board.judge(primary, refused)
    assert [r.name for r in board.order("a@example.com")] == ["primary", "backup"]
    assert board.judge(primary, refused)
    assert [r.name for r in board.order("a@example.com")] == ["backup"]
    now[0] += 299
    assert [r.name for r in board.order("a@example.com")] == ["backup"]
    now[0] += 2
    assert [r.name for r in board.order("a@example.com")] == ["primary", "backup"]
    # A message it takes resets its count: one refusal after it does not set it aside.
    assert not board.judge(primary, Result(Outcome.SENT, Scope.RECIPIENT, 250, "ok"))
    board.judge(primary, refused)
    assert board.aside() == {}
    # A reader's own refusal is not the relay's.
    assert not board.judge(primary, Result(Outcome.REJECTED, Scope.RECIPIENT, 550, "no user"))


def test_a_lone_relay_is_always_tried_even_when_set_aside() -> None:
    board = Board(Pool(SmtpSettings(), password=None, size=1).board.relays, after=1, aside=60)
    (only,) = board.relays
    board.judge(only, Result(Outcome.RETRY, Scope.CONNECTION, None, "refused"))
    assert board.aside() == {"primary": "1 failures in a row: refused"}
    assert board.order("a@example.com") == [only]
