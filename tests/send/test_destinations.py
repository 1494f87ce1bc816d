"""Pacing per destination: a recipient domain that throttles us rests with its own backoff while
the rest of the list goes on; the run stops for throttling only when every destination still to
send to keeps throttling. Real aiosmtpd, a real outbox (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from newsletter.config.settings import SmtpSettings
from newsletter.database import Database
from newsletter.models import DeliveryStatus as S
from newsletter.models import OutgoingMessage, Subscriber
from newsletter.send.job import Job, Options
from newsletter.send.pacing import Destinations
from newsletter.send.replies import Outcome, Scope
from newsletter.send.smtp import Pool
from support.database import Listing, deliver
from support.smtp import Fault, FaultyHandler, Marks, Server, dialogue, send_one, start

GMAIL = "421 4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail"
DOMAINS = ("a.test", "b.test", "c.test", "gmail.test")


def build(sub: Subscriber, stored: str | None = None, row_id: int = 0) -> OutgoingMessage:
    mid = stored or f"<{row_id}.{sub.envelope}>"
    data = f"From: n@example.org\r\nTo: {sub.envelope}\r\nMessage-ID: {mid}\r\n\r\nHi\r\n"
    return OutgoingMessage(
        message_id=mid, sender="n@example.org", recipient=sub.envelope, data=data.encode()
    )


def addresses(per_domain: int) -> list[str]:
    # Interleaved, as a real list is: each claimed batch holds every domain.
    return [f"r{i}@{d}" for i in range(per_domain) for d in DOMAINS]


def job(readers: list[str]) -> Job:
    listing = Listing(lambda: [Subscriber(envelope=a) for a in readers])
    return Job(issue=14, list_name="main", subscribers=listing, build=build)


def pool(server: Server) -> Pool:
    smtp = SmtpSettings(host=server.host, port=server.port, security="none", timeout=30)
    return Pool(smtp, password=None, size=3)


@pytest.mark.slow
async def test_a_throttling_domain_rests_while_the_other_three_are_sent(database: Database) -> None:
    """gmail.test throttles every message until the other three domains have all been
    received, and each of its messages at least six times (more than max_attempts): its rows
    rest and come back without counting as tries, the others go on, and every reader gets one
    copy. (Before, each throttle halved the whole run's pace and paused it, and five ended it.)"""
    readers = addresses(10)
    others = [r for r in readers if not r.endswith("@gmail.test")]
    handler = FaultyHandler()

    def throttled(rcpt: str) -> bool:
        if not rcpt.endswith("@gmail.test"):
            return False
        return throttle.used[rcpt] < 6 or any(handler.by_recipient[o] == 0 for o in others)

    throttle = Fault("rcpt", reply=GMAIL, match=throttled)
    handler.faults.append(throttle)
    options = Options(concurrency=3, retry_base=0.01, retry_cap=0.05, breaker_threshold=1000)
    async with start(handler) as server:
        report = await deliver(job(readers), pool(server), database, options)
    assert report.complete, (report.stopped, dict(report.counts))
    assert sorted(handler.by_recipient.values()) == [1] * 40
    order = [r.recipients[0] for r in handler.received]
    first_gmail = next(i for i, r in enumerate(order) if r.endswith("@gmail.test"))
    assert set(order[:first_gmail]) == set(others)  # all three went on meanwhile
    assert min(throttle.used[r] for r in readers if r.endswith("@gmail.test")) >= 6
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    assert {rows[r].state for r in readers} == {S.SENT}


@pytest.mark.slow
async def test_the_run_stops_when_every_destination_keeps_throttling(database: Database) -> None:
    handler = FaultyHandler(
        [
            Fault("rcpt", reply=GMAIL, match=lambda r: r.endswith("@gmail.test")),
            Fault("rcpt", reply="421 4.7.0 [TSS04] Messages temporarily deferred"),
        ]
    )
    options = Options(concurrency=2, retry_base=0.01, retry_cap=0.02, breaker_threshold=3)
    readers = [r for r in addresses(3) if r.endswith(("gmail.test", "a.test"))]
    async with start(handler) as server:
        report = await deliver(job(readers), pool(server), database, options)
    assert "every destination still to send to keeps throttling us" in report.stopped
    assert "gmail.test (421 4.7.28" in report.stopped
    assert "a.test (421 4.7.0 [TSS04]" in report.stopped
    assert handler.received == []
    counts = Counter(r.state for r in database.deliveries.rows(14, "main"))
    assert set(counts) <= {S.DEFERRED, S.PENDING}  # nothing in doubt, a re-run resumes


def test_a_domain_rests_longer_with_each_throttle_and_not_after_a_message() -> None:
    now = [1000.0]
    rests = Destinations(base=1.0, cap=8.0, stuck_after=3, clock=lambda: now[0])
    assert rests.resting("x@gmail.com") == 0.0
    first = rests.throttled("x@gmail.com", "421 4.7.28")
    assert 1000.5 <= first <= 1001.0
    assert rests.resting("y@GMAIL.com.") == first  # the domain rests, not the address
    assert rests.resting("x@yahoo.com") == 0.0
    second = rests.throttled("y@gmail.com", "421 4.7.28")
    assert 1001.0 <= second <= 1002.0
    resting = rests.resting_domains()
    assert resting == ["gmail.com"]
    assert rests.stuck_before(5000.0, resting) == ""  # two throttles: not stuck yet
    third = rests.throttled("y@gmail.com", "421 4.7.28")
    assert rests.stuck_before(third, resting) == "gmail.com (421 4.7.28)"
    assert rests.stuck_before(None, resting) == "gmail.com (421 4.7.28)"  # nothing else left
    assert rests.stuck_before(now[0] + 0.1, resting) == ""  # another row is due before it
    assert rests.stuck_before(None, []) == ""  # its rest over: its rows are claimed again
    rests.accepted("z@gmail.com")
    assert rests.resting("x@gmail.com") == 0.0
    for _ in range(10):
        capped = rests.throttled("x@gmail.com", "421")
    assert capped <= now[0] + 8.0


def test_a_rest_that_ended_since_the_look_still_keeps_the_run_going() -> None:
    # At load 4, the run looked for due rows leaving gmail's out (it rested), the query took
    # long enough for the rest to end, and then "when is the next row due?" found no rest and no
    # row: the run ended with gmail's readers pending and deferred, and no reason given.
    now = [1000.0]
    rests = Destinations(base=1.0, cap=8.0, stuck_after=3, clock=lambda: now[0])
    until = rests.throttled("x@gmail.test", "421 4.7.28")
    skipped = rests.resting_domains()
    assert skipped == ["gmail.test"]
    now[0] = until + 5.0  # the slow look for the other domains' rows
    assert rests.next_due(None, skipped) == until  # due already: the caller looks again
    assert rests.next_due(None) is None  # a look made now would have claimed them itself
    assert rests.next_due(now[0] + 1.0, skipped) == until


async def test_a_421_to_rcpt_then_closing_is_the_throttle_not_a_lost_connection() -> None:
    """A server that pipelines and answers RCPT `421 ... closing` then hangs up (as RFC 5321
    says a 421 does) gave its reason before it went: the destination's throttle, not a
    connection lost before DATA (which was retried as the connection's fault, a try counted)."""

    async def refuse_and_close(writer: asyncio.StreamWriter) -> None:
        writer.write(f"{GMAIL}, closing\r\n".encode())
        await writer.drain()
        writer.close()

    ehlo = b"250-test\r\n250-PIPELINING\r\n250 8BITMIME\r\n"
    answers: dict[bytes, Any] = {b"EHLO": ehlo, b"RCPT": refuse_and_close}
    async with dialogue(b"220 test\r\n", answers) as port:
        smtp = SmtpSettings(host="127.0.0.1", port=port, security="none", timeout=30)
        the_pool = Pool(smtp, password=None, size=1)
        marks = Marks()
        result = await send_one(the_pool, build(Subscriber(envelope="r@gmail.test")), marks)
        await the_pool.close()
    assert (result.outcome, result.scope, result.code) == (
        Outcome.THROTTLED,
        Scope.DESTINATION,
        421,
    )
    assert marks.calls == 0  # no 354: nothing in doubt
