"""Warm-up: a new sending domain's daily cap, from the published ramp or the editor's table,
counted from the delivery log across sends, days beginning at midnight in the newsletter's zone
(an injected clock, no waiting); a send past the cap stops with the status line, resumable."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from newsletter.config.settings import SmtpSettings
from newsletter.database import Database
from newsletter.days import day_of
from newsletter.models import DeliveryStatus as S
from newsletter.models import OutgoingMessage, Subscriber
from newsletter.send import processes
from newsletter.send.job import Delivered, Job, Options
from newsletter.send.lease import Lease, worker_id
from newsletter.send.smtp import Pool
from newsletter.send.warmup import Pause, Warmup, daily_cap
from support.database import Listing, deliver, mark_sending, plan, record
from support.smtp import FaultyHandler, Server, start

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def test_the_standard_ramp_is_ghosts() -> None:
    caps = {day: daily_cap("standard", day) for day in (0, 1, 2, 3, 7, 14, 21, 28, 35, 41)}
    assert caps == {
        0: 200,
        1: 237,
        2: 280,
        3: 332,
        7: 650,
        14: 2116,
        21: 6880,
        28: 22377,
        35: 72779,
        41: 200_000,
    }
    assert daily_cap("standard", 42) is None
    assert daily_cap("off", 0) is None
    assert [daily_cap([50, 100], d) for d in range(3)] == [50, 100, None]


def sent_at(database: Database, stamps: list[str]) -> None:
    """One sent row per stamp (issue 9, its own list), its sent_at set to the stamp."""
    plan(database, 9, "old", [f"old{i}@example.com" for i in range(len(stamps))])
    for row, stamp in zip(database.deliveries.rows(9, "old"), stamps, strict=True):
        mark_sending(database, row.id, f"<{row.id}@x>")
        record(database, row.id, S.SENT)
        database.backend.run("UPDATE deliveries SET sent_at = ? WHERE id = ?", (stamp, row.id))


def test_today_is_counted_from_the_log_by_the_zones_midnight(database: Database) -> None:
    # Berlin is UTC+1 in December: its 2 December begins at 2026-12-01T23:00Z.
    sent_at(
        database,
        [
            "2026-11-30T10:00:00.000+00:00",  # day 0 of the ramp (30 November in Berlin)
            "2026-12-01T22:59:59.999+00:00",  # 1 December in Berlin
            "2026-12-01T23:00:00.000+00:00",  # 2 December in Berlin: today
            "2026-12-02T12:00:00.000+00:00",
        ],
    )
    moment = dt.datetime(2026, 12, 2, 20, 0, tzinfo=BERLIN)
    warm = Warmup(database, [10, 20, 30, 40], "Europe/Berlin", total=12000, clock=lambda: moment)
    assert (warm.cap, warm.sent, warm.left()) == (30, 2, 28)  # day 2: 30
    assert warm.resumes() == dt.datetime(2026, 12, 3, 0, 0, tzinfo=BERLIN)
    assert warm.pause() == Pause(
        "warm-up: 30 of 12,000 today, resumes at 00:00 Europe/Berlin",
        dt.datetime(2026, 12, 3, 0, 0, tzinfo=BERLIN).timestamp(),
    )
    later = moment + dt.timedelta(days=2)  # past the table: no cap
    assert Warmup(database, [10, 20, 30, 40], "Europe/Berlin", clock=lambda: later).left() is None


def test_day_zero_is_the_configured_start_or_today_for_a_new_log(database: Database) -> None:
    moment = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)
    fresh = Warmup(database, "standard", "", clock=lambda: moment)
    assert (fresh.cap, fresh.sent) == (200, 0)
    started = Warmup(
        database, "standard", "Asia/Shanghai", start=dt.date(2026, 11, 25), clock=lambda: moment
    )
    assert started.cap == 650  # day 7


def test_a_clock_set_back_keeps_day_zeros_cap_for_the_editors_own_ramp(
    database: Database,
) -> None:
    """The first sent row is stamped a day ahead of the clock (the clock was set back): the
    warm-up day is -1, which is day 0's cap for a custom ramp as for "standard"."""
    sent_at(database, ["2026-12-03T09:00:00.000+00:00"])
    moment = dt.datetime(2026, 12, 2, 9, 0, tzinfo=BERLIN)
    own = Warmup(database, [2, 4, 8], "Europe/Berlin", clock=lambda: moment)
    assert (own.cap, own.left()) == (2, 2)
    standard = Warmup(database, "standard", "Europe/Berlin", clock=lambda: moment)
    assert standard.cap == 200


@pytest.mark.parametrize(
    ("day", "hours"),
    [(dt.date(2026, 10, 25), 25), (dt.date(2026, 3, 29), 23), (dt.date(2026, 12, 2), 24)],
)
def test_a_day_runs_to_the_next_local_midnight_whatever_its_length(
    day: dt.date, hours: int
) -> None:
    noon = dt.datetime.combine(day, dt.time(12), BERLIN)
    today = day_of(noon, BERLIN)
    assert today.date == day
    assert today.begin == dt.datetime.combine(day, dt.time(), BERLIN)
    assert today.end == dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), BERLIN)
    assert today.end - today.begin == dt.timedelta(hours=hours)


def test_the_last_hour_of_a_25_hour_day_counts_against_its_cap(database: Database) -> None:
    """Berlin's 2026-10-25 has 25 hours (02:00-03:00 twice): its last hour begins at
    2026-10-25T22:00Z, midnight plus 24 hours. Four sent at 23:10 use up a cap of 4."""
    sent_at(database, ["2026-10-25T22:10:00.000+00:00"] * 4)  # 23:10 CET
    moment = dt.datetime(2026, 10, 25, 23, 30, tzinfo=BERLIN)
    warm = Warmup(database, [4], "Europe/Berlin", start=dt.date(2026, 10, 25), clock=lambda: moment)
    assert (warm.cap, warm.sent, warm.left()) == (4, 4, 0)
    assert warm.resumes() == dt.datetime(2026, 10, 26, 0, 0, tzinfo=BERLIN)


def test_a_23_hour_day_ends_at_its_midnight_not_an_hour_into_the_next(database: Database) -> None:
    """Berlin's 2026-03-29 has 23 hours: what went out at 00:30 on the 30th (another worker's
    clock a little ahead) is the 30th's, not the 29th's."""
    sent_at(database, ["2026-03-29T22:30:00.000+00:00"] * 4)  # 2026-03-30 00:30 CEST
    moment = dt.datetime(2026, 3, 29, 23, 30, tzinfo=BERLIN)
    start = dt.date(2026, 3, 29)
    warm = Warmup(database, [4, 4], "Europe/Berlin", start=start, clock=lambda: moment)
    assert (warm.cap, warm.sent, warm.left()) == (4, 0, 4)
    assert warm.resumes() == dt.datetime(2026, 3, 30, 0, 0, tzinfo=BERLIN)


def build(sub: Subscriber, stored: str | None = None, row_id: int = 0) -> OutgoingMessage:
    mid = stored or f"<{row_id}.{sub.envelope}>"
    data = f"From: n@example.org\r\nTo: {sub.envelope}\r\nMessage-ID: {mid}\r\n\r\nHi\r\n"
    return OutgoingMessage(
        message_id=mid, sender="n@example.org", recipient=sub.envelope, data=data.encode()
    )


def job(n: int) -> Job:
    listing = Listing(lambda: [Subscriber(envelope=f"r{i}@example.com") for i in range(n)])
    return Job(issue=14, list_name="main", subscribers=listing, build=build)


def pool(server: Server) -> Pool:
    smtp = SmtpSettings(host=server.host, port=server.port, security="none", timeout=30)
    return Pool(smtp, password=None, size=3)


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 3])
async def test_a_send_past_todays_cap_stops_and_the_next_day_resumes(
    database: Database, concurrency: int
) -> None:
    """Day 0 allows 5 of 12: the send stops with the status line; a re-run the same day sends
    nothing; on day 1 (the ramp started a day earlier: the same log, the same today) 6 more
    go out, then the rest on day 2."""
    handler = FaultyHandler()
    today = dt.datetime.now(zoneinfo.ZoneInfo("Europe/Berlin")).date()
    options = Options(
        concurrency=concurrency, warmup=[5, 11, 100], timezone="Europe/Berlin", warmup_start=today
    )
    async with start(handler) as server:
        first = await deliver(job(12), pool(server), database, options)
        again = await deliver(job(12), pool(server), database, options)
        next_day = Options(**{**options.__dict__, "warmup_start": today - dt.timedelta(days=1)})
        second = await deliver(job(12), pool(server), database, next_day)
        day_two = Options(**{**options.__dict__, "warmup_start": today - dt.timedelta(days=2)})
        third = await deliver(job(12), pool(server), database, day_two)
    assert first.stopped == "warm-up: 5 of 12 today, resumes at 00:00 Europe/Berlin"
    midnight = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), BERLIN)
    assert first.resumes_at == midnight.timestamp()  # the value a scheduled send resumes at
    assert first.counts[S.SENT] == 5
    assert first.counts[S.PENDING] == 7
    assert again.stopped.startswith("warm-up: 5 of 12 today")
    assert again.counts[S.SENT] == 5
    assert second.stopped.startswith("warm-up: 11 of 12 today")
    assert second.counts[S.SENT] == 11
    assert third.complete
    assert third.resumes_at is None
    assert sorted(handler.by_recipient.values()) == [1] * 12


async def test_a_send_after_the_clock_was_set_back_stops_at_day_zeros_cap(
    database: Database,
) -> None:
    """The log's first sent row is a day ahead of now: `warmup = [2, 4, 8]` sends 2 of 6,
    never all 6."""
    ahead = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    sent_at(database, [ahead.strftime("%Y-%m-%dT%H:%M:%S.000+00:00")])
    handler = FaultyHandler()
    options = Options(concurrency=1, warmup=[2, 4, 8], timezone="Europe/Berlin")
    async with start(handler) as server:
        done = await deliver(job(6), pool(server), database, options)
    assert done.stopped.startswith("warm-up: 2 of 6 today")
    assert done.counts[S.SENT] == 2
    assert len(handler.received) == 2


PAUSED_UNTIL = 1_796_256_000.25  # an instant no clock of the test's would give


def _paused(*_: object) -> Delivered:
    """A worker process's run that today's cap stopped at once."""
    return Delivered(stopped="warm-up: 0 of 2 today, resumes at 00:00 UTC", resumes_at=PAUSED_UNTIL)


def test_worker_processes_pass_the_warmups_pause_on(database: Database) -> None:
    """With `--processes`, the pause a worker process's run gave reaches the run's report
    (the forked processes speak to their parent through a pipe)."""
    with Lease(database, worker_id(), 14, "main", 30) as lease:
        options = Options(concurrency=2, processes=2)
        delivered = processes.deliver(job(2), database, options, lease, None, _paused)
    assert delivered.stopped == "warm-up: 0 of 2 today, resumes at 00:00 UTC"
    assert delivered.resumes_at == PAUSED_UNTIL
