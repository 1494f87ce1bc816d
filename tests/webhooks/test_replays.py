"""A provider's signed request reused over another event (issue 40, point 1): what each
signature covers decides it. Mailgun signs only timestamp + token, so a token is good for the
one body it came with; SendGrid, Resend and SES sign the body (and its event id), so a changed
event does not verify; Postmark signs nothing, its credentials are the only secret. Real signed
requests through each provider's reader, the tokens and the events' ids on both backends; the
genuine retry of a body is answered as before and counted once (docs/guide/bounces.md, the
table of what each provider's signature covers)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.verp import make_tag
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database, open_database
from newsletter.database.webhooktokens import KEPT_PAST
from newsletter.models import DeliveryStatus
from newsletter.webhooks.common import Event, RefusedError, apply_events
from newsletter.webhooks.postmark import Postmark
from newsletter.webhooks.resend import Resend
from newsletter.webhooks.sendgrid import SendGrid
from newsletter.webhooks.ses import Ses
from support.database import due, plan, record
from support.hooks import (
    RESEND_SECRET,
    SNS_TOPIC,
    SendGridKey,
    Sns,
    mailgun,
    mailgun_reader,
    svix_headers,
)

SECRET = b"webhook-replays-secret-0123456789abcdef"
ALICE = "alice@example.net"
BOB = "bob@example.net"
TOLERANCE = 300


def sent(database: Database) -> dict[str, str]:
    """Issue 14 sent to ALICE and BOB on main: each reader's signed tag."""
    ids = {a: f"<14.{a.partition('@')[0]}@news.example.org>" for a in (ALICE, BOB)}
    plan(database, 14, "main", [ALICE, BOB], ids)
    tags = {}
    for row in due(database, 14, "main"):
        record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
        tags[row.recipient] = make_tag(SECRET, row.id)
    return tags


def applied(database: Database, events: list[Event]) -> list[Verdict]:
    policy = Policy(database, BouncesSettings(), [SECRET])
    return [d.verdict for d in apply_events(database, policy, events, time.time())]


def suppressed(database: Database) -> dict[str, str]:
    """Who is suppressed on main, and why."""
    found = {a: database.suppressions.get("main", a) for a in (ALICE, BOB)}
    return {a: s.source for a, s in found.items() if s is not None}


def mailgun_failed(tag: str) -> dict[str, Any]:
    """Mailgun's documented permanent-failure sample (webhook payloads), for ALICE."""
    return {
        "event": "failed",
        "id": "G9Bn5sl1TC6nu79C8C0bwg",
        "timestamp": 1521233195.375624,
        "log-level": "error",
        "severity": "permanent",
        "reason": "suppress-bounce",
        "delivery-status": {
            "attempt-no": 1,
            "message": "",
            "code": 605,
            "description": "Not delivering to previously bounced address",
        },
        "message": {"headers": {"to": ALICE, "message-id": "20130503.1@mailgun.org"}},
        "recipient": ALICE,
        "recipient-domain": "example.net",
        "user-variables": {"newsletter_tag": tag},
    }


def reposted(body: bytes, event_data: dict[str, Any]) -> bytes:
    """`body`'s signature object, exactly as captured, over another event."""
    signature = json.loads(body)["signature"]
    return json.dumps({"signature": signature, "event-data": event_data}).encode()


def test_a_mailgun_signature_reposted_over_another_readers_complaint_is_refused(
    database: Database, database_target: Path | str
) -> None:
    """The issue's request: the signature object of a real event, reposted within the
    tolerance with `{"event": "complained", "id": "anything-new"}` and Bob's tag, is refused
    and suppresses nobody; the genuine retry of the first body still reads, and counts once.
    A second connection (another process of the site) sees the token as the first did."""
    tags = sent(database)
    reader = mailgun_reader(database, TOLERANCE)
    body = mailgun(mailgun_failed(tags[ALICE]))
    assert applied(database, reader.read({}, body, time.time())) == [Verdict.HARD]
    assert suppressed(database) == {ALICE: "bounced"}

    forged = reposted(
        body,
        {
            "event": "complained",
            "id": "anything-new",
            "recipient": BOB,
            "user-variables": {"newsletter_tag": tags[BOB]},
        },
    )
    with open_database(database_target) as other:
        for process in (reader, mailgun_reader(other, TOLERANCE)):
            with pytest.raises(RefusedError, match="came with another request before"):
                process.read({}, forged, time.time())
        retried = mailgun_reader(other, TOLERANCE).read({}, body, time.time())
    assert applied(database, retried) == [Verdict.REPEATED]
    # A retry signed anew (its own token and timestamp) over the same event: its id counted.
    resigned = reader.read({}, mailgun(mailgun_failed(tags[ALICE])), time.time())
    assert applied(database, resigned) == [Verdict.REPEATED]
    assert suppressed(database) == {ALICE: "bounced"}
    assert database.bounces.counts(14, "main") == {Kind.HARD: 1}


def test_a_mailgun_replay_at_the_edge_of_the_tolerance_is_refused(database: Database) -> None:
    """A request whose timestamp is just inside the tolerance when it is checked: the token it
    came with must still be kept when the replay's own is stored a moment later (the tokens
    past the tolerance are dropped on a clock read after the check), or the replay's body
    becomes the token's body."""
    tags = sent(database)
    stamp = int(time.time()) - TOLERANCE
    body = mailgun(mailgun_failed(tags[ALICE]), stamp=stamp)
    reader = mailgun_reader(database, TOLERANCE)
    assert applied(database, reader.read({}, body, stamp + TOLERANCE)) == [Verdict.HARD]
    complaint = {**mailgun_failed(tags[BOB]), "event": "complained", "id": "anything-new"}
    with pytest.raises(RefusedError, match="came with another request before"):
        reader.read({}, reposted(body, complaint), stamp + TOLERANCE)
    assert suppressed(database) == {ALICE: "bounced"}
    # Kept no longer than KEPT_PAST past the tolerance: the table does not grow for ever.
    later = stamp + TOLERANCE + KEPT_PAST + 1
    assert database.webhook_tokens.first_use("mailgun", "t2", "d", later, later - TOLERANCE)
    assert database.backend.fetch("SELECT token FROM webhook_tokens") == [("t2",)]


def sendgrid_bounce(tag: str, address: str = ALICE, event_id: str = "6g4ZI7SA") -> bytes:
    """SendGrid's documented bounce sample (Event Webhook reference), our tag a custom arg."""
    item = {
        "email": address,
        "timestamp": 1513299569,
        "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>",
        "event": "bounce",
        "sg_event_id": event_id,
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
        "newsletter_tag": tag,
    }
    return json.dumps([item]).encode()


def test_a_sendgrid_signature_over_a_changed_event_does_not_verify(database: Database) -> None:
    """ECDSA over timestamp + the raw body: the body is the batch, every event id in it."""
    tags = sent(database)
    key = SendGridKey()
    reader = SendGrid(key.public, TOLERANCE)
    body = sendgrid_bounce(tags[ALICE])
    headers = key.headers(body)
    assert applied(database, reader.read(headers, body, time.time())) == [Verdict.HARD]
    changed = json.loads(body)
    changed[0].update(event="spamreport", sg_event_id="anything-new", email=BOB)
    changed[0]["newsletter_tag"] = tags[BOB]
    for forged in (json.dumps(changed).encode(), sendgrid_bounce(tags[ALICE], event_id="new")):
        with pytest.raises(RefusedError, match="does not verify"):
            reader.read(headers, forged, time.time())
    assert applied(database, reader.read(headers, body, time.time())) == [Verdict.REPEATED]
    assert suppressed(database) == {ALICE: "bounced"}


def resend_complaint(tag: str, address: str = ALICE) -> bytes:
    """Resend's documented email.complained sample, our tag in data.tags."""
    return json.dumps(
        {
            "type": "email.complained",
            "created_at": "2024-11-22T23:41:12.126Z",
            "data": {
                "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
                "from": "Acme <onboarding@resend.dev>",
                "to": [address],
                "subject": "Sending this example",
                "tags": [{"name": "newsletter_tag", "value": tag}],
            },
        }
    ).encode()


def test_a_resend_signature_covers_the_body_and_the_event_id(database: Database) -> None:
    """Svix signs id.timestamp.body: neither another body nor another svix-id (the event id)
    verifies with the captured signature."""
    tags = sent(database)
    reader = Resend(RESEND_SECRET, TOLERANCE)
    body = resend_complaint(tags[ALICE])
    headers = svix_headers(body, "msg_1")
    assert applied(database, reader.read(headers, body, time.time())) == [Verdict.COMPLAINT]
    for forged_body, forged in (
        (resend_complaint(tags[BOB], BOB), headers),
        (body, {**headers, "svix-id": "msg_anything_new"}),
    ):
        with pytest.raises(RefusedError, match="no svix-signature verifies"):
            reader.read(forged, forged_body, time.time())
    assert applied(database, reader.read(headers, body, time.time())) == [Verdict.REPEATED]
    assert suppressed(database) == {ALICE: "complained"}


def ses_bounce(tag: str, address: str = ALICE) -> dict[str, Any]:
    """SES's documented event-publishing bounce, our tag in mail.tags."""
    return {
        "eventType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [
                {
                    "emailAddress": address,
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                }
            ],
            "timestamp": "2017-08-05T00:41:02.669Z",
        },
        "mail": {
            "timestamp": "2017-08-05T00:40:02.012Z",
            "source": "news@news.example.org",
            "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
            "destination": [address],
            "tags": {"newsletter_tag": [tag]},
        },
    }


def test_an_sns_signature_covers_the_ses_event_and_its_message_id(database: Database) -> None:
    """SNS signs Message (the SES event, whole) and MessageId (the event id) among its fields."""
    tags = sent(database)
    sns = Sns()
    reader = Ses((SNS_TOPIC,), TOLERANCE, sns.fetch)
    body = sns.notification(ses_bounce(tags[ALICE]), "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324")
    assert applied(database, reader.read(sns.headers(), body, time.time())) == [Verdict.HARD]
    data = json.loads(body)
    for forged in (
        {**data, "Message": json.dumps(ses_bounce(tags[BOB], BOB))},
        {**data, "MessageId": "anything-new"},
    ):
        with pytest.raises(RefusedError, match="does not verify"):
            reader.read(sns.headers(), json.dumps(forged).encode(), time.time())
    again = reader.read(sns.headers(), body, time.time())
    assert applied(database, again) == [Verdict.REPEATED]
    assert suppressed(database) == {ALICE: "bounced"}


def test_postmark_signs_nothing_so_its_credentials_are_the_whole_secret(
    database: Database,
) -> None:
    """What the docs' table says of Postmark: with the credentials any event is taken (there is
    no signature to reuse, nor to check), and only the event's id stops a replay of one."""
    tags = sent(database)
    reader = Postmark("postmark", "postmark-test-password")
    token = base64.b64encode(b"postmark:postmark-test-password").decode()
    headers = {"authorization": f"Basic {token}"}

    def bounce(tag: str, address: str, ident: int) -> bytes:
        return json.dumps(
            {
                "RecordType": "Bounce",
                "ID": ident,
                "Type": "HardBounce",
                "Metadata": {"newsletter_tag": tag},
                "Description": "The server was unable to deliver your message.",
                "Details": "Test bounce details",
                "Email": address,
            }
        ).encode()

    first = bounce(tags[ALICE], ALICE, 4323372036854775807)
    assert applied(database, reader.read(headers, first, time.time())) == [Verdict.HARD]
    assert applied(database, reader.read(headers, first, time.time())) == [Verdict.REPEATED]
    with pytest.raises(RefusedError, match="credentials"):
        reader.read({}, bounce(tags[BOB], BOB, 1), time.time())
    other = reader.read(headers, bounce(tags[BOB], BOB, 1), time.time())
    assert applied(database, other) == [Verdict.HARD]
    assert suppressed(database) == {ALICE: "bounced", BOB: "bounced"}
