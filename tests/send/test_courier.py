"""The site's mail through a real SMTP server (aiosmtpd on loopback), on both backends: each mail
once, its link a working single-purpose token, deferrals retried with a backoff, an upload cut
off left `unknown` and never sent again, a claim lost to another worker sends no body."""

from __future__ import annotations

import email
import email.policy
import re
from pathlib import Path

from newsletter.config.settings import Settings, load_settings
from newsletter.database import Database
from newsletter.database.mailqueue import MailKind, MailState
from newsletter.mail.tokens import Purpose, verify_link
from newsletter.send.courier import Courier
from newsletter.send.smtp import Pool
from support.smtp import Fault, FaultyHandler, Server, start

SECRET = b"courier-tests-secret-0123456789abcdef"


def _settings(project: Path, server: Server, **worker: object) -> Settings:
    settings = load_settings(project / "newsletter.toml", environ={})
    smtp = settings.smtp.model_copy(update={"host": server.host, "port": server.port})
    config = settings.worker.model_copy(update=worker)
    return settings.model_copy(update={"smtp": smtp, "worker": config})


def _courier(settings: Settings, database: Database, owner: str = "w1") -> Courier:
    pool = Pool(settings.smtp, password=None, size=settings.worker.concurrency)
    return Courier(database.backend, settings, SECRET, pool, owner)


def _link(data: bytes) -> str:
    message = email.message_from_bytes(data, policy=email.policy.default)
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    found = re.search(r"https?://\S+/(?:confirm|move)/(\S+)", text)
    assert found is not None, text
    return found.group(1)


async def test_each_due_mail_goes_once_with_a_link_that_confirms_it(
    project: Path, database: Database
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = _settings(project, server)
        queue = database.site_mail
        for n in range(5):
            queue.queue(
                MailKind.CONFIRM, "main", f"r{n}@example.org", f"r{n}@example.org", nonce=f"n{n}"
            )
        courier = _courier(settings, database)
        try:
            assert await courier.deliver_due() == 0.05
            assert await courier.deliver_due() == settings.worker.poll  # nothing left
        finally:
            await courier.pool.close()
    assert sorted(handler.by_recipient.values()) == [1] * 5
    assert queue.counts()[MailState.SENT] == 5
    received = next(r for r in handler.received if r.recipients == ["r3@example.org"])
    target = verify_link(SECRET, _link(received.data), Purpose.CONFIRM, 0.0)
    assert (target.list_name, target.address, target.nonce) == ("main", "r3@example.org", "n3")
    assert b"List-Unsubscribe-Post: List-Unsubscribe=One-Click" in received.data


async def test_a_deferred_mail_waits_then_fails_after_max_attempts(
    project: Path, database: Database
) -> None:
    handler = FaultyHandler([Fault("rcpt", "451 4.7.1 try again later")])
    async with start(handler) as server:
        settings = _settings(project, server, max_attempts=2)
        queue = database.site_mail
        mail = queue.queue(MailKind.CONFIRM, "main", "a@example.org", "a@example.org")
        courier = _courier(settings, database)
        try:
            await courier.deliver_due()
            first = queue.get(mail)
            assert first is not None
            assert first.state is MailState.DUE
            assert first.attempts == 1
            assert (queue.next_due() or 0) > 10  # backed off (15 s at least), not hammered
            database.backend.run("UPDATE site_mail SET due_at = 0")
            await courier.deliver_due()
        finally:
            await courier.pool.close()
    last = queue.get(mail)
    assert last is not None
    assert last.state is MailState.FAILED
    assert last.smtp_code == 451
    assert handler.received == []


async def test_an_upload_cut_off_is_unknown_and_never_sent_again(
    project: Path, database: Database
) -> None:
    handler = FaultyHandler([Fault("data", drop=True, store_before_drop=True, times=1)])
    async with start(handler) as server:
        settings = _settings(project, server)
        queue = database.site_mail
        mail = queue.queue(MailKind.CONFIRM, "main", "a@example.org", "a@example.org")
        courier = _courier(settings, database)
        try:
            await courier.deliver_due()
            await courier.deliver_due()
        finally:
            await courier.pool.close()
    found = queue.get(mail)
    assert found is not None
    assert found.state is MailState.UNKNOWN
    assert handler.by_recipient["a@example.org"] == 1  # it arrived; it is not sent twice


async def test_a_claim_lost_to_another_worker_sends_no_body(
    project: Path, database: Database
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = _settings(project, server)
        queue = database.site_mail
        queue.queue(MailKind.CONFIRM, "main", "a@example.org", "a@example.org")
        courier = _courier(settings, database, owner="paused")
        try:
            (mail,) = courier.claim()
            # Paused past its lease: reaped, and claimed by another worker meanwhile.
            database.backend.run("UPDATE site_mail SET owner = 'other' WHERE id = ?", (mail.id,))
            await courier._deliver(mail)
        finally:
            await courier.pool.close()
    assert handler.received == []
    found = queue.get(mail.id)
    assert found is not None
    assert found.state is MailState.CLAIMED  # the other worker's, untouched


async def test_a_welcome_and_a_change_carry_their_own_links(
    project: Path, database: Database
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        settings = _settings(project, server)
        queue = database.site_mail
        queue.queue(MailKind.WELCOME, "main", "w@example.org", "w@example.org")
        queue.queue(
            MailKind.CHANGE,
            "main",
            "new@example.org",
            "new@example.org",
            nonce="c",
            detail="o@x.org",
        )
        courier = _courier(settings, database)
        try:
            await courier.deliver_due()
        finally:
            await courier.pool.close()
    change = next(r for r in handler.received if r.recipients == ["new@example.org"])
    target = verify_link(SECRET, _link(change.data), Purpose.CHANGE, 0.0)
    assert (target.address, target.detail, target.nonce) == ("new@example.org", "o@x.org", "c")
    welcome = next(r for r in handler.received if r.recipients == ["w@example.org"])
    assert b"/confirm/" not in welcome.data
