"""`send --subjects A B` as a real process against a real SMTP server: the sample gets both
subjects, a scanner's sweep of one variant's links counts for nothing, people's clicks pick the
other, and the rest of the list gets it at the decision, each reader one message across both
phases; refused with a clear line when tracking is off."""

from __future__ import annotations

import asyncio
import email
import email.policy
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.models import DeliveryStatus
from newsletter.rendering.places import Place, Region
from support.sendcli import HANG, environment, finish, newsletter, spawn, write_list
from support.smtp import FaultyHandler, start

pytestmark = pytest.mark.slow
SEND = ["send", "--issue", "14", "--list", "main", "--yes"]


def _subjects(handler: FaultyHandler) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for received in handler.received:
        subject = str(
            email.message_from_bytes(received.data, policy=email.policy.default)["Subject"]
        )
        for rcpt in received.recipients:
            found.setdefault(rcpt, []).append(subject)
    return found


def _click(row: int, at: float, *, agent: str, since: float) -> StoredClick:
    event = ClickRecord(at, Place(Region.TITLE, 0, 0), "GET", False, agent, "", since, row)
    return StoredClick(14, "main", event)


async def test_people_pick_the_subject_the_rest_get_each_reader_once(project: Path) -> None:
    addresses = write_list(project / "big.csv", 200)
    target = project / ".newsletter" / "outbox.sqlite3"
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_TRACKING__CLICKS="per-reader",
        )
        test = [*SEND, "--subjects", "Alpha", "Beta", "--sample", "50%", "--decide-after", "1h"]
        first = await newsletter(test, env, project)
        assert first.code == 0, first.err
        assert "subject test: 50% of main now" in first.out
        sample = _subjects(handler)
        by_subject = Counter(s for got in sample.values() for s in got)
        assert set(by_subject) == {"Alpha", "Beta"}
        assert 60 < len(sample) < 140
        resumed = await newsletter(SEND, env, project)  # before the decision: the sample only
        assert resumed.code == 0, resumed.err
        assert len(handler.received) == len(sample)
        with open_database(target) as database:
            rows = {r.recipient: r.id for r in database.deliveries.rows(14, "main")}
            (booked,) = database.schedules.listing(issue=14, limit=10)
            alpha = [rows[a] for a, got in sample.items() if got == ["Alpha"]]
            beta = [rows[a] for a, got in sample.items() if got == ["Beta"]]
            now = time.time()
            sweep = [_click(r, now, agent="machine:scanner", since=600.0) for r in alpha]
            at_delivery = [_click(r, now + 1, agent="browser:firefox", since=1.0) for r in alpha]
            people = [
                _click(r, now + 5 * n, agent="browser:firefox", since=900.0)
                for n, r in enumerate(beta[:12])
            ]
            people += [_click(alpha[0], now + 200, agent="browser:edge", since=900.0)]
            database.clicks.add([*sweep, *at_delivery, *people])
            # The decision falls due (as the hour passing would): the worker's send decides.
            database.backend.run("UPDATE subject_tests SET decide_at = 0")
        rest = await newsletter(SEND, env, project)
        assert rest.code == 0, rest.err
        assert "subject test decided:" in rest.out
        assert "'Beta' won on people's clicks per message" in rest.out
        report = await newsletter(["report", "--issue", "14"], env, project)
    assert booked.due_at > now
    got = _subjects(handler)
    assert sorted(got) == sorted(addresses)
    assert all(len(subjects) == 1 for subjects in got.values())  # once across both phases
    assert {got[a][0] for a in addresses if a not in sample} == {"Beta"}
    with open_database(target) as database:
        assert database.deliveries.counts(14, "main")[DeliveryStatus.SENT] == 200
    assert report.code == 0, report.err
    assert "Subject test: 'Beta' went to the rest. 'Alpha':" in report.out


async def test_a_subject_test_is_refused_with_tracking_off(project: Path) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        done = await newsletter([*SEND, "--subjects", "Alpha", "Beta"], env, project)
    assert done.code == 1
    assert (
        "a subject test is decided by people's clicks, and [tracking] clicks is 'off'" in done.err
    )
    assert "Traceback" not in done.err
    assert handler.received == []


async def test_the_worker_decides_at_the_time_and_sends_the_rest(project: Path) -> None:
    """The rest as the worker sends it: the booked send starts once due (a sample run to its
    end is not taken for the whole send), decides, and sends the winner to the rest."""
    addresses = write_list(project / "big.csv", 100)
    target = project / ".newsletter" / "outbox.sqlite3"
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_TRACKING__CLICKS="per-reader",
            NEWSLETTER_SCHEDULE__QUIET_HOURS="",
            NEWSLETTER_WORKER__POLL="0.1",
        )
        test = [*SEND, "--subjects", "Alpha", "Beta", "--sample", "60%"]
        first = await newsletter(test, env, project)
        assert first.code == 0, first.err
        sample = _subjects(handler)
        with open_database(target) as database:
            rows = {r.recipient: r.id for r in database.deliveries.rows(14, "main")}
            beta = [rows[a] for a, got in sample.items() if got == ["Beta"]]
            now = time.time()
            database.clicks.add(
                [
                    _click(r, now + 5 * n, agent="browser:firefox", since=900.0)
                    for n, r in enumerate(beta[:12])
                ]
            )
            database.backend.run("UPDATE subject_tests SET decide_at = 0")
            database.backend.run("UPDATE schedules SET due_at = ?", (now,))
        worker = await spawn(["worker"], env, project)
        deadline = time.monotonic() + HANG  # a hang guard, never a measure
        while len(handler.received) < 100:
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        done = await finish(worker)
    assert done.code == 0, done.err
    got = _subjects(handler)
    assert sorted(got) == sorted(addresses)
    assert all(len(subjects) == 1 for subjects in got.values())
    assert {got[a][0] for a in addresses if a not in sample} == {"Beta"}
