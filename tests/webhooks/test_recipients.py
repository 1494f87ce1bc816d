"""A provider's event acts on the row its tag names only when it is about that row's recipient
(issue 40, point 5): a tag is the row's id and a MAC, so with the outbox replaced and the
secret kept (or two newsletters sharing one) an old tag names another person's row. Such an
event is held for review and acts on nothing; the row's own recipient's event, however the
provider spells the address, still applies. Real signed requests through the readers, the
policy on both backends."""

from __future__ import annotations

import json
import time

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.verp import make_tag
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database
from newsletter.models import DeliveryStatus
from newsletter.webhooks.common import apply_events
from newsletter.webhooks.sendgrid import SendGrid
from support.database import due, plan, record
from support.hooks import SendGridKey, mailgun, mailgun_reader

SECRET = b"webhook-recipients-secret-0123456789abcdef"
BOB = "bob@example.net"
DAVE = "dave@example.net"
BOBS_TEXT = "550 5.1.1 <bob@example.net>: Recipient address rejected: User unknown"


def daves_row(database: Database) -> int:
    """Issue 14 sent to DAVE on main, the new outbox's first row: the id Bob's old tag names."""
    plan(database, 14, "main", [DAVE], {DAVE: "<0f3c9a61d2b84e07@news.example.org>"})
    (row,) = due(database, 14, "main")
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    return row.id


def policy(database: Database) -> Policy:
    return Policy(database, BouncesSettings(), [SECRET])


def sendgrid_bounce(address: str, tag: str, event_id: str) -> dict[str, object]:
    """SendGrid's documented bounce event, its reason quoting the address."""
    return {
        "email": address,
        "timestamp": 1513299569,
        "event": "bounce",
        "sg_event_id": event_id,
        "reason": BOBS_TEXT.replace(BOB, address),
        "status": "5.1.1",
        "type": "bounce",
        "newsletter_tag": tag,
    }


def test_a_bounce_for_bob_under_a_tag_naming_daves_row_is_held(database: Database) -> None:
    """SendGrid's bounce for Bob and Mailgun's complaint for Bob, each with the tag of Dave's
    row: held for review (why names both), Dave not suppressed, nothing recorded on his row
    (Bob's text is not filed as his); each provider's retry changes nothing."""
    tag = make_tag(SECRET, daves_row(database))
    key = SendGridKey()
    body = json.dumps([sendgrid_bounce(BOB, tag, "bob-1")]).encode()
    complained = mailgun(
        {
            "event": "complained",
            "id": "bob-2",
            "recipient": BOB,
            "user-variables": {"newsletter_tag": tag},
        }
    )

    def delivered() -> list[Verdict]:
        events = SendGrid(key.public, 300).read(key.headers(body), body, time.time())
        events += mailgun_reader(database).read({}, complained, time.time())
        decisions = apply_events(database, policy(database), events, time.time())
        why = f"it is about {BOB}, but its tag names the message to {DAVE}"
        assert all(d.held.startswith(why) for d in decisions if d.verdict is Verdict.HELD)
        return [d.verdict for d in decisions]

    assert delivered() == [Verdict.HELD, Verdict.HELD]
    assert delivered() == [Verdict.REPEATED, Verdict.REPEATED]  # the providers' retries
    assert database.suppressions.get("main", DAVE) is None
    assert database.bounces.counts(14, "main") == {}
    assert database.backend.fetch("SELECT * FROM bounce_reports") == []
    held = database.bounces.held()
    assert sorted(h.report for h in held) == ["mailgun:bob-2", "sendgrid:bob-1"]
    assert {h.delivery.recipient for h in held} == {DAVE}


def test_daves_own_event_under_his_tag_applies_however_the_provider_spells_him(
    database: Database,
) -> None:
    """The row's recipient, as the provider echoes it (the case of the address as it was handed
    over), is the row's: applied at once, not held."""
    tag = make_tag(SECRET, daves_row(database))
    key = SendGridKey()
    body = json.dumps([sendgrid_bounce("Dave@Example.NET", tag, "dave-1")]).encode()
    events = SendGrid(key.public, 300).read(key.headers(body), body, time.time())
    (decision,) = apply_events(database, policy(database), events, time.time())
    assert decision.verdict is Verdict.HARD
    found = database.suppressions.get("main", DAVE)
    assert (found.source if found else None) == "bounced"
    assert database.bounces.counts(14, "main") == {Kind.HARD: 1}
