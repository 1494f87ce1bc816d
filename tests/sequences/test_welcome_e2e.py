"""Done when: readers who sign up and confirm through serve's real pages (HTTP) get step 1 at once
and step 2 after its delay from `newsletter worker` processes that are killed with SIGKILL
between and during the steps: never a step twice, nothing after a one-click unsubscribe; a
step whose upload a kill cut off is `unknown` and never sent again."""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from newsletter.database import open_database
from newsletter.mail.tokens import LinkTarget, Purpose, sign_link
from newsletter.models import DeliveryStatus
from support.sendcli import HANG, environment, finish, spawn
from support.sequences import confirmed, welcome, write_step
from support.signups import SIGNUP_ENV, member, post_signup
from support.site import SECRET, running_service
from support.smtp import Fault, FaultyHandler, start

pytestmark = pytest.mark.slow
ANN, BOB = "ann@example.org", "bob@example.org"


def _subjects(handler: FaultyHandler, address: str) -> list[str]:
    return [str(_parsed(r.data)["Subject"]) for r in handler.received if r.recipients == [address]]


def _parsed(data: bytes) -> email.message.EmailMessage:
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


async def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + HANG  # a hang guard, never a measure
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _sign_up_and_confirm(base: str, target: Path, address: str) -> None:
    assert post_signup(base, address).is_success
    found = member(target, address)
    assert found is not None
    when = int(time.time()) + 600
    link = sign_link(SECRET, LinkTarget(Purpose.CONFIRM, "main", address, found.nonce, when))
    assert httpx.post(f"{base}/confirm/{link}", data={"Confirm": "Yes"}).is_success


async def test_signed_up_readers_get_each_step_once_across_kills_and_none_after_leaving(
    project: Path,
) -> None:
    welcome(project, second="2s")
    # Step 3 waits a week, so no worker can send it before Ann leaves, however slow the
    # machine; the edit that brings it forward (below) reaches those who have not had it.
    write_step(project, "welcome", "03-more", after="1w", title="More")
    handler = FaultyHandler()
    env_site = {**SIGNUP_ENV, "NEWSLETTER_SCHEDULE__QUIET_HOURS": ""}
    with running_service(project, **env_site) as site:
        target = site.settings.database_target
        assert isinstance(target, Path)
        for address in (ANN, BOB):
            await asyncio.to_thread(_sign_up_and_confirm, site.url, target, address)
        async with start(handler) as server:
            env = environment(
                server.port,
                **site.env,
                NEWSLETTER_WORKER__POLL="0.05",
                NEWSLETTER_WORKER__LEASE="2",
            )
            first = await spawn(["worker"], env, project)
            await _until(lambda: all("Hello" in _subjects(handler, a) for a in (ANN, BOB)))
            first.kill()  # between the steps
            assert (await finish(first)).code == -signal.SIGKILL
            second = await spawn(["worker"], env, project)
            await _until(lambda: all("Tips" in _subjects(handler, a) for a in (ANN, BOB)))
            second.kill()
            await finish(second)
            tips = next(r for r in handler.received if r.recipients == [ANN] and b"Tips" in r.data)
            header = str(_parsed(tips.data)["List-Unsubscribe"])
            one_click = re.findall(r"<(http[^>]+)>", header)[0]
            left = await asyncio.to_thread(
                httpx.post, one_click, data={"List-Unsubscribe": "One-Click"}
            )
            assert left.is_success
            write_step(project, "welcome", "03-more", after="0s", title="More")
            third = await spawn(["worker"], env, project)
            await _until(lambda: "More" in _subjects(handler, BOB))
            third.send_signal(signal.SIGTERM)
            assert (await finish(third)).code == 0
    assert sorted(s for s in _subjects(handler, BOB) if s in ("Hello", "Tips", "More")) == [
        "Hello",
        "More",
        "Tips",
    ]
    assert sorted(s for s in _subjects(handler, ANN) if s in ("Hello", "Tips", "More")) == [
        "Hello",
        "Tips",
    ]
    # That step 2 waits out its delay is proved with an injected clock (test_duty.py).


async def test_a_step_cut_off_in_its_upload_is_unknown_and_never_sent_again(
    project: Path,
) -> None:
    welcome(project, second="1s")
    target = project / ".newsletter" / "outbox.sqlite3"
    with open_database(target) as database:
        key = confirmed(database, ANN)
        database.enrolments.join("main", key, ["welcome"], time.time())
    hold = asyncio.Event()
    handler = FaultyHandler([Fault("data", hold=hold, times=1)])
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_SCHEDULE__QUIET_HOURS="",
            NEWSLETTER_WORKER__POLL="0.05",
        )
        proc = await spawn(["worker"], env, project)
        fault = handler.faults[0]
        await _until(lambda: sum(fault.used.values()) == 1)  # step 1's body is in, no reply
        proc.kill()
        await finish(proc)
        hold.set()  # whether the server kept it, the worker cannot know
        again = await spawn(["worker"], env, project)
        await _until(lambda: "Tips" in _subjects(handler, ANN))
        again.send_signal(signal.SIGTERM)
        done = await finish(again)
    assert done.code == 0, done.err
    assert _subjects(handler, ANN).count("Tips") == 1
    assert _subjects(handler, ANN).count("Hello") <= 1  # whatever the server did: never again
    with open_database(target) as database:
        one = database.enrolments.step_key("welcome", 1)
        assert database.deliveries.counts(one, "main")[DeliveryStatus.UNKNOWN] == 1


async def test_two_workers_on_postgresql_one_killed_never_double_a_step(
    project: Path, postgres_url: str
) -> None:
    """Workers on several machines: two `newsletter worker` processes share one PostgreSQL
    outbox, one is killed in the middle; each reader's step goes at most once (a step the
    killed worker was uploading is `unknown`), and every other step goes."""
    welcome(project, second="1s")
    readers = [f"r{n:02d}@example.org" for n in range(40)]
    with open_database(postgres_url) as database:
        for address in readers:
            database.enrolments.join("main", confirmed(database, address), ["welcome"], time.time())
        keys = [database.enrolments.step_key("welcome", n) for n in (1, 2)]

    def states() -> list[DeliveryStatus]:
        with open_database(postgres_url) as database:
            return [r.state for key in keys for r in database.deliveries.rows(key, "main")]

    handler = FaultyHandler([Fault("data", sleep=0.02)])  # uploads in flight at the kill
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_OUTBOX__URL=postgres_url,
            NEWSLETTER_SCHEDULE__QUIET_HOURS="",
            NEWSLETTER_WORKER__POLL="0.05",
            NEWSLETTER_SEND__LEASE="2",
        )
        first, second = [await spawn(["worker"], env, project) for _ in range(2)]
        await _until(lambda: len(handler.received) >= 15)
        first.kill()
        await finish(first)
        done_states = (DeliveryStatus.SENT, DeliveryStatus.UNKNOWN)
        await _until(lambda: len(found := states()) == 80 and all(s in done_states for s in found))
        second.send_signal(signal.SIGTERM)
        assert (await finish(second)).code == 0
    final = states()
    unknown = final.count(DeliveryStatus.UNKNOWN)
    assert final.count(DeliveryStatus.SENT) + unknown == 80
    assert unknown <= 8  # at most the uploads in flight when the worker died
    for address in readers:
        got = _subjects(handler, address)
        assert got.count("Hello") <= 1
        assert got.count("Tips") <= 1
    assert sum(len(_subjects(handler, a)) for a in readers) >= 80 - unknown
