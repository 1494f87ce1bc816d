"""The worker's duty of welcome sequences against a real SMTP server (aiosmtpd on loopback), on
SQLite and PostgreSQL, with an injected clock: step 1 at once, step 2 after its delay, each once
per reader however many duties look at once; nothing after an unsubscribe, a suppression or an
erasure; an edited step goes as it is now, a removed one is skipped; quiet hours wait."""

from __future__ import annotations

import asyncio
import email
import email.policy
import socket
from pathlib import Path

import pytest

from newsletter.config.settings import Settings
from newsletter.database import LATEST, STEP_KEYS, Database, open_database
from newsletter.database.enrolments import STEP_REMOVED
from newsletter.issues.sequencefiles import load_sequence
from newsletter.mail.tokens import signing_key
from newsletter.models import DeliveryStatus
from newsletter.sequences.duty import SequenceDuty
from newsletter.sequences.overview import view
from newsletter.signup.forgetting import forget
from support.database import mark_sending, plan, record
from support.erasure import dump
from support.sequences import confirmed, duty_settings, welcome, write_step
from support.smtp import FaultyHandler, start

S = DeliveryStatus


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def _duty(settings: Settings, clock: Clock, owner: str = "w1") -> SequenceDuty:
    key = signing_key(settings, allow_ephemeral=False)
    return SequenceDuty(settings, key, owner, lambda line: None, clock=clock)


def _subjects(handler: FaultyHandler, address: str) -> list[str]:
    found = []
    for received in handler.received:
        if received.recipients == [address]:
            message = email.message_from_bytes(received.data, policy=email.policy.default)
            found.append(str(message["Subject"]))
    return found


async def _look(*duties: SequenceDuty) -> None:
    for duty in duties:
        await duty.start()
    try:
        await asyncio.gather(*(duty.look() for duty in duties))
    finally:
        for duty in duties:
            await duty.stop()


WEEKLY = """
[lists.weekly]
path = "weekly.example.csv"
name = "Weekly"
id = "weekly.news.example.org"
"""


async def test_a_reader_on_both_lists_of_a_sequence_gets_each_step_once(
    project: Path, database: Database
) -> None:
    """The first step names two lists and ann confirmed on both (each confirmation joins her,
    and the editor's `sequences enrol` of each list too): one Hello, one Tips, never two."""
    with (project / "newsletter.toml").open("a", encoding="utf-8") as config:
        config.write(WEEKLY)
    write_step(project, "welcome", "01-hello", after="0s", title="Hello", lists="main, weekly")
    write_step(project, "welcome", "02-tips", after="2s", title="Tips")
    ann = confirmed(database, "ann@example.org", "main")
    confirmed(database, "ann@example.org", "weekly")
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        clock = Clock(1_000_000.0)
        joined = [
            database.enrolments.join("main", ann, ["welcome"], clock.at),
            database.enrolments.join("weekly", ann, ["welcome"], clock.at),
            database.enrolments.enrol_list("welcome", "weekly", clock.at),
        ]
        await _look(_duty(settings, clock))
        assert _subjects(handler, "ann@example.org") == ["Hello"]
        clock.at += 2.5
        await _look(_duty(settings, clock))
        await _look(_duty(settings, clock))
    assert _subjects(handler, "ann@example.org") == ["Hello", "Tips"]
    assert joined == [1, 0, 0]
    assert database.enrolments.of(ann) == [("welcome", "main", 2, 1_000_000.0)]


def test_an_outbox_with_a_reader_enrolled_twice_keeps_the_enrolment_furthest_along(
    database_target: Path | str,
) -> None:
    """Enrolments made before migration 17 (ann in `welcome` from main at step 1 and from
    weekly at step 2): the migration keeps weekly's, so no step of it goes to her again."""
    with open_database(database_target) as old:
        old.backend.run("DROP INDEX enrolments_once")
        old.backend.run("DELETE FROM schema_migrations WHERE version >= 17")
        old.backend.run("DROP TABLE webhook_tokens")
        for list_name, step in (("main", 1), ("weekly", 2), ("extra", 1)):
            old.backend.run(
                "INSERT INTO enrolments (sequence, list, address_key, joined_at, step, last_at)"
                " VALUES ('welcome', ?, 'ann@example.org', 1.0, ?, 2.0)",
                (list_name, step),
            )
    with open_database(database_target) as migrated:
        assert migrated.backend.version() == LATEST
        assert migrated.enrolments.of("ann@example.org") == [("welcome", "weekly", 2, 1.0)]


async def test_step_one_at_once_step_two_after_its_delay_each_once(
    project: Path, database: Database
) -> None:
    welcome(project, second="2s")
    ann = confirmed(database, "ann@example.org")
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        clock = Clock(1_000_000.0)
        database.enrolments.join("main", ann, ["welcome"], clock.at)
        await _look(_duty(settings, clock))
        assert _subjects(handler, "ann@example.org") == ["Hello"]
        clock.at += 1.0  # not yet: step 2 waits 2 s after step 1
        await _look(_duty(settings, clock))
        assert _subjects(handler, "ann@example.org") == ["Hello"]
        clock.at += 1.5
        await _look(_duty(settings, clock))
        await _look(_duty(settings, clock))  # a second look finds nothing more to send
    assert _subjects(handler, "ann@example.org") == ["Hello", "Tips"]
    assert database.enrolments.at_steps("welcome") == {2: 1}
    key = database.enrolments.step_key("welcome", 2)
    assert key > STEP_KEYS
    assert database.deliveries.counts(key, "main")[S.SENT] == 1


@pytest.mark.slow
async def test_two_duties_at_once_never_double_a_step(project: Path, database: Database) -> None:
    welcome(project, second="0s")
    addresses = [f"r{n:02d}@example.org" for n in range(30)]
    clock = Clock(1_000_000.0)
    for address in addresses:
        database.enrolments.join("main", confirmed(database, address), ["welcome"], clock.at)
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        for _ in range(3):
            await _look(_duty(settings, clock, "w1"), _duty(settings, clock, "w2"))
            clock.at += 1.0
    assert sorted(handler.by_recipient.values()) == [2] * 30  # two steps, each once
    for address in addresses:
        assert sorted(_subjects(handler, address)) == ["Hello", "Tips"]


async def test_no_step_after_an_unsubscribe_a_suppression_or_an_erasure(
    project: Path, database: Database
) -> None:
    welcome(project, second="10s")
    clock = Clock(1_000_000.0)
    keys = {}
    for name in ("left", "stopped", "erased", "stays"):
        keys[name] = confirmed(database, f"{name}@example.org")
        database.enrolments.join("main", keys[name], ["welcome"], clock.at)
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        await _look(_duty(settings, clock))
        assert len(handler.received) == 4
        database.roster.leave("main", keys["left"])
        database.suppressions.add("main", "stopped@example.org", "one-click")
        erasure = forget(
            database.backend, signing_key(settings, allow_ephemeral=False), keys["erased"]
        )
        assert erasure.enrolments == 1
        clock.at += 11.0
        await _look(_duty(settings, clock))
    assert _subjects(handler, "stays@example.org") == ["Hello", "Tips"]
    for name in ("left", "stopped", "erased"):
        assert _subjects(handler, f"{name}@example.org") == ["Hello"]
    if not isinstance(database.target, str):
        assert "erased@example.org" not in dump(database.target)


async def test_the_overview_and_the_worker_log_say_what_went_and_who_waits(
    project: Path, database: Database
) -> None:
    """Step 1 went to ann and bob, then bob unsubscribed: the worker logged the step's send,
    the overview has 2 joined (none without a step), 1 waiting for step 2 (ann: bob will never
    get it), and a step test on the staging list apart from the readers' log."""
    welcome(project, second="1d")
    clock = Clock(1_000_000.0)
    keys = {}
    for name in ("ann", "bob"):
        keys[name] = confirmed(database, f"{name}@example.org")
        database.enrolments.join("main", keys[name], ["welcome"], clock.at)
    handler = FaultyHandler()
    lines: list[str] = []
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        key = signing_key(settings, allow_ephemeral=False)
        duty = SequenceDuty(settings, key, "w1", lines.append, clock=clock)
        await _look(duty)
    assert len(handler.received) == 2
    assert lines == ["sequence step welcome/01-hello -> main: 2 sent"]
    database.roster.leave("main", keys["bob"])
    tips = database.enrolments.step_key("welcome", 2)
    plan(database, tips, "staging", ["editor@example.org"])  # a `sequences test` of step 2
    (row,) = database.deliveries.rows(tips, "staging")
    mark_sending(database, row.id, "<t@x>")
    record(database, row.id, S.SENT)
    seen = view(load_sequence(project / "sequences", "welcome"), database, {"staging"})
    assert (seen.joined, seen.not_started) == (2, 0)
    hello, second = seen.steps
    assert (hello.at_step, hello.waiting, hello.counts[S.SENT], hello.tests[S.SENT]) == (2, 0, 2, 0)
    assert (second.waiting, second.counts[S.SENT], second.tests[S.SENT]) == (1, 0, 1)
    assert second.next_due == 1_000_000.0 + 86400.0


async def test_a_half_saved_step_is_named_as_a_step_and_its_fix_is_logged(
    project: Path, database: Database
) -> None:
    """02-tips.md caught empty mid-save: the worker names what a step starts with (a step has
    no `number:`), once; the saved file is logged as picked up and its step goes out."""
    welcome(project, second="0s")
    tips = project / "sequences" / "welcome" / "02-tips.md"
    saved = tips.read_text(encoding="utf-8")
    tips.write_text("", encoding="utf-8")
    clock = Clock(1_000_000.0)
    ann = confirmed(database, "ann@example.org")
    database.enrolments.join("main", ann, ["welcome"], clock.at)
    handler = FaultyHandler()
    lines: list[str] = []
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        key = signing_key(settings, allow_ephemeral=False)
        duty = SequenceDuty(settings, key, "w1", lines.append, clock=clock)
        await duty.start()
        await duty.look()
        await duty.look()
        assert lines == [
            "sequence welcome: sequences/welcome/02-tips.md:1: must start with front matter:"
            " a line ---, then title: … and after: 2d, then another line ---"
        ]
        tips.write_text(saved, encoding="utf-8")
        await duty.look()
        await duty.look()
        await duty.stop()
    assert lines[1:] == [
        "sequence welcome: its files read without a fault again",
        "sequence step welcome/01-hello -> main: 1 sent",
        "sequence step welcome/02-tips -> main: 1 sent",
    ]
    assert _subjects(handler, "ann@example.org") == ["Hello", "Tips"]


async def test_an_edited_step_goes_as_it_is_now_and_a_removed_one_is_skipped(
    project: Path, database: Database
) -> None:
    welcome(project, second="5s")
    write_step(project, "welcome", "03-more", after="5s", title="More")
    clock = Clock(1_000_000.0)
    ann = confirmed(database, "ann@example.org")
    database.enrolments.join("main", ann, ["welcome"], clock.at)
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        await _look(_duty(settings, clock))
        (project / "sequences" / "welcome" / "02-tips.md").unlink()
        write_step(project, "welcome", "03-more", after="5s", title="More, edited")
        clock.at += 6.0
        await _look(_duty(settings, clock))
    assert _subjects(handler, "ann@example.org") == ["Hello", "More, edited"]
    assert database.enrolments.at_steps("welcome") == {3: 1}


async def test_quiet_hours_hold_a_step_until_they_end(project: Path, database: Database) -> None:
    welcome(project)
    ann = confirmed(database, "ann@example.org")
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(
            project, server.host, server.port, database.target, quiet_hours="22:00-07:00"
        )
        newsletter = settings.newsletter.model_copy(update={"timezone": "UTC"})
        settings = settings.model_copy(update={"newsletter": newsletter})
        three_am = 1_000_000_000.0 - 1_000_000_000.0 % 86400 + 3 * 3600  # 03:00 UTC
        clock = Clock(three_am)
        database.enrolments.join("main", ann, ["welcome"], clock.at)
        duty = _duty(settings, clock)
        await duty.start()
        try:
            assert await duty.look() == 60.0  # looks again within a minute, sends nothing
            assert handler.received == []
            clock.at += 4 * 3600  # 07:00
            await duty.look()
        finally:
            await duty.stop()
    assert _subjects(handler, "ann@example.org") == ["Hello"]


async def test_a_removed_steps_rows_not_yet_sent_are_skipped_saying_why(
    project: Path, database: Database
) -> None:
    welcome(project)
    clock = Clock(1_000_000.0)
    ann = confirmed(database, "ann@example.org")
    database.enrolments.join("main", ann, ["welcome"], clock.at)
    (due,) = database.enrolments.due("welcome", 0, 2, clock.at, from_joining=False)
    key = database.enrolments.step_key("welcome", 2)
    database.enrolments.plan(key, 2, [due], ["<planned@example.org>"], clock.at)
    (project / "sequences" / "welcome" / "02-tips.md").unlink()
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        await _look(_duty(settings, clock))
    assert handler.received == []
    (row,) = database.deliveries.rows(key, "main")
    assert (row.state, row.smtp_reply) == (S.SKIPPED, STEP_REMOVED)


async def test_a_dead_workers_claims_come_back_and_its_upload_is_unknown(
    project: Path, database: Database
) -> None:
    """A worker killed holding claimed rows (SQLite: recovered as the next worker starts;
    PostgreSQL: reaped once its lease ran out): the unstarted row is sent by another, the one
    it was uploading is `unknown` and not sent again."""
    welcome(project, second="1w")
    clock = Clock(1_000_000.0)
    for name in ("ann", "bob"):
        database.enrolments.join("main", confirmed(database, f"{name}@example.org"), ["welcome"], 0)
    key = database.enrolments.step_key("welcome", 1)
    due = database.enrolments.due("welcome", 0, 1, clock.at, from_joining=False)
    database.enrolments.plan(key, 1, due, [f"<{r.address_key}>" for r in due], clock.at)
    database.leases.register("dead", key, "main", "elsewhere", 1, 30.0)
    assert len(database.leases.claim(key, "main", "dead", 10, max_tries=5, at=clock.at)) == 2
    database.backend.run(
        "UPDATE deliveries SET state = 'sending' WHERE issue = ? AND recipient = ?",
        (key, "bob@example.org"),
    )
    database.backend.run("UPDATE workers SET lease_until = 0 WHERE id = 'dead'")
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        await _look(_duty(settings, clock))
    assert _subjects(handler, "ann@example.org") == ["Hello"]
    assert _subjects(handler, "bob@example.org") == []
    states = {r.recipient: r.state for r in database.deliveries.rows(key, "main")}
    assert states == {"ann@example.org": S.SENT, "bob@example.org": S.UNKNOWN}


@pytest.mark.slow
async def test_a_relay_that_is_down_defers_the_step_until_it_is_back(
    project: Path, database: Database
) -> None:
    """A relay the duty cannot reach defers the step, as the engine does an issue's message;
    the step goes, once, when the relay is back."""
    welcome(project)
    clock = Clock(1_000_000.0)
    database.enrolments.join("main", confirmed(database, "ann@example.org"), ["welcome"], clock.at)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    settings = duty_settings(project, "127.0.0.1", port, database.target)
    await _look(_duty(settings, clock))
    key = database.enrolments.step_key("welcome", 1)
    (row,) = database.deliveries.rows(key, "main")
    assert row.state is S.DEFERRED  # as for an issue: tried again after its backoff
    assert "cannot connect" in row.smtp_reply
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = duty_settings(project, server.host, server.port, database.target)
        await _look(_duty(settings, clock))
    assert _subjects(handler, "ann@example.org") == ["Hello"]
