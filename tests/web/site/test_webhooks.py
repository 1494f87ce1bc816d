"""Providers' bounce and complaint webhooks through the running site: verified before anything
is read, applied once through the bounce policy (suppression, the report recorded), forgeries,
replays and stale timestamps changing nothing and logged with their reason."""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.verp import make_tag, read_tag
from newsletter.cli.main import cli
from newsletter.config.settings import BouncesSettings, load_settings
from newsletter.database import Database, open_database
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory
from newsletter.models import DeliveryStatus, Subscriber
from newsletter.rendering.render import render_issue
from newsletter.webhooks.common import Event, RefusedError, apply_events
from newsletter.webhooks.resend import Resend
from newsletter.webhooks.sendgrid import SendGrid
from support.database import due, plan, record
from support.site import ALICE, SECRET, RunningService, running_service
from support.webhooks import sendgrid_signed

# The notes' verified vectors (sendgrid-python's tests; docs.svix.com), reproduced as-is.
SG_VECTOR_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGh"
    "HPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)
SG_VECTOR_TS = "1588788367"
SG_VECTOR_BODY = b'{"category":"example_payload","event":"test_event","message_id":"message_id"}'
SG_VECTOR_SIG = (
    "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j"
    "/0="
)
SVIX_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SVIX_ID, SVIX_TS, SVIX_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", b'{"test": 2432232314}'
SVIX_SIG = "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC = base64.b64encode(
    KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()
RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-signing-secret-32by").decode()


@pytest.fixture
def service(project: Path) -> Iterator[RunningService]:
    with running_service(
        project,
        NEWSLETTER_WEBHOOK_SENDGRID_KEY=PUBLIC,
        NEWSLETTER_WEBHOOK_RESEND_SECRET=RESEND_SECRET,
    ) as running:
        yield running


def sent_to(database: Database, address: str = ALICE) -> int:
    """Issue 14 sent to `address` on main: its row id."""
    plan(database, 14, "main", [address], {address: "<14.alice@news.example.org>"})
    row = due(database, 14, "main")[0]
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    return row.id


def sendgrid_events(
    tag: str, event: str = "bounce", event_id: str = "6g4ZI7SA-xmRDv57GoPIPw=="
) -> bytes:
    """SendGrid's documented bounce sample (Event Webhook reference), our tag as a custom arg."""
    item = {
        "email": ALICE,
        "timestamp": 1513299569,
        "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>",
        "event": event,
        "category": "cat facts",
        "sg_event_id": event_id,
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
        "newsletter_tag": tag,
    }
    return json.dumps([item]).encode()


def sendgrid_headers(body: bytes, stamp: int | None = None) -> dict[str, str]:
    return sendgrid_signed(KEY, body, stamp)


def resend_complaint(tag: str) -> bytes:
    """Resend's documented email.complained sample, our tag in data.tags."""
    return json.dumps(
        {
            "type": "email.complained",
            "created_at": "2024-11-22T23:41:12.126Z",
            "data": {
                "created_at": "2024-11-22T23:41:11.894719+00:00",
                "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
                "from": "Acme <onboarding@resend.dev>",
                "to": [ALICE],
                "subject": "Sending this example",
                "tags": [{"name": "newsletter_tag", "value": tag}],
            },
        }
    ).encode()


def svix_headers(body: bytes, ident: str, stamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if stamp is None else stamp)
    key = base64.b64decode(RESEND_SECRET.removeprefix("whsec_"))
    mac = hmac.digest(key, f"{ident}.{ts}.".encode() + body, hashlib.sha256)
    return {
        "svix-id": ident,
        "svix-timestamp": ts,
        "svix-signature": "v1,bm90LXRoaXMtb25l v1," + base64.b64encode(mac).decode(),
        "content-type": "application/json",
    }


def stored(service: RunningService) -> tuple[list[tuple[str, str, str]], list[tuple[str, ...]]]:
    """The suppressions and the recorded bounce reports (kind, source) in the site's outbox."""
    with open_database(service.settings.database_target) as database:
        found = database.suppressions.get("main", ALICE)
        supp = [(found.list, found.address, found.source)] if found else []
        reports = database.backend.fetch("SELECT report, kind, source FROM bounce_reports")
    return supp, [tuple(r) for r in reports]


def tag_for_alice(service: RunningService) -> str:
    with open_database(service.settings.database_target) as database:
        return make_tag(SECRET.encode(), sent_to(database))


def test_the_notes_vectors_verify_and_fail_when_changed() -> None:
    sendgrid = SendGrid(SG_VECTOR_KEY, 300)
    headers = {
        "x-twilio-email-event-webhook-signature": SG_VECTOR_SIG,
        "x-twilio-email-event-webhook-timestamp": SG_VECTOR_TS,
    }
    # The signature verifies; the vector's body is one object, not the array SendGrid posts.
    with pytest.raises(RefusedError, match="not a JSON array") as verified:
        sendgrid.read(headers, SG_VECTOR_BODY, float(SG_VECTOR_TS))
    assert verified.value.status == 400
    with pytest.raises(RefusedError, match="does not verify"):
        sendgrid.read({**headers, "x-twilio-email-event-webhook-timestamp": ""}, SG_VECTOR_BODY, 0)
    svix = Resend(SVIX_SECRET, 300)
    headers = {"svix-id": SVIX_ID, "svix-timestamp": SVIX_TS, "svix-signature": f"v1,{SVIX_SIG}"}
    assert svix.read(headers, SVIX_BODY, float(SVIX_TS)) == []
    with pytest.raises(RefusedError, match="no svix-signature"):
        svix.read(headers, SVIX_BODY + b" ", float(SVIX_TS))


def test_a_sendgrid_bounce_suppresses_once_and_a_replay_changes_nothing(
    service: RunningService,
) -> None:
    tag = tag_for_alice(service)
    body = sendgrid_events(tag)
    url = f"{service.url}/webhooks/sendgrid"
    first = httpx.post(url, content=body, headers=sendgrid_headers(body))
    assert (first.status_code, first.text) == (200, "ok\n")
    expected = (
        [("main", ALICE, "bounced")],
        [("sendgrid:6g4ZI7SA-xmRDv57GoPIPw==", "hard", "webhook:sendgrid")],
    )
    assert stored(service) == expected
    # The provider retries (or someone replays the signed request): answered 200, applied once.
    again = httpx.post(url, content=body, headers=sendgrid_headers(body))
    assert again.status_code == 200
    assert stored(service) == expected
    assert service.wait_for_log("already counted")


def test_a_forged_or_stale_sendgrid_request_changes_nothing_and_the_log_says_why(
    service: RunningService,
) -> None:
    tag = tag_for_alice(service)
    body = sendgrid_events(tag)
    url = f"{service.url}/webhooks/sendgrid"
    forged = httpx.post(
        url, content=body.replace(b"bounce", b"spamreport", 1), headers=sendgrid_headers(body)
    )
    assert (forged.status_code, forged.text) == (401, "refused\n")
    assert service.wait_for_log("webhook sendgrid refused: the signature does not verify")
    stale = httpx.post(url, content=body, headers=sendgrid_headers(body, int(time.time()) - 3600))
    assert (stale.status_code, stale.text) == (401, "refused\n")
    assert service.wait_for_log("(a replay?)")
    assert stored(service) == ([], [])
    unsigned = httpx.post(url, content=body, headers={"content-type": "application/json"})
    assert unsigned.status_code == 401
    assert stored(service) == ([], [])


def test_a_resend_complaint_suppresses_and_a_bad_signature_does_not(
    service: RunningService,
) -> None:
    tag = tag_for_alice(service)
    body = resend_complaint(tag)
    url = f"{service.url}/webhooks/resend"
    stale = httpx.post(
        url, content=body, headers=svix_headers(body, "msg_1", int(time.time()) - 600)
    )
    assert stale.status_code == 401
    wrong = svix_headers(body, "msg_1")
    wrong["svix-signature"] = "v1," + base64.b64encode(b"x" * 32).decode()
    assert httpx.post(url, content=body, headers=wrong).status_code == 401
    assert stored(service) == ([], [])
    for _ in range(2):
        answer = httpx.post(url, content=body, headers=svix_headers(body, "msg_1"))
        assert (answer.status_code, answer.text) == (200, "ok\n")
    assert stored(service) == (
        [("main", ALICE, "complained")],
        [("resend:msg_1", "complaint", "webhook:resend")],
    )


def test_an_unconfigured_provider_is_not_found_and_a_big_batch_fits(
    service: RunningService,
) -> None:
    assert httpx.post(f"{service.url}/webhooks/mailgun", content=b"{}").status_code == 404
    tag = tag_for_alice(service)
    # Far past the forms' 4 KiB: a provider's batch of events (SendGrid posts hundreds).
    items = json.loads(sendgrid_events(tag, "delivered")) * 400
    body = json.dumps(items).encode()
    answer = httpx.post(
        f"{service.url}/webhooks/sendgrid", content=body, headers=sendgrid_headers(body)
    )
    assert answer.status_code == 200
    assert stored(service) == ([], [])
    # Past 1 MiB is no provider's batch: refused before the signature is even looked at.
    huge = b"[" + b" " * (1 << 20) + b"]"
    answer = httpx.post(
        f"{service.url}/webhooks/sendgrid", content=huge, headers=sendgrid_headers(huge)
    )
    assert answer.status_code == 413


def test_events_apply_once_on_each_backend(database: Database) -> None:
    """The seen-id table and the policy on SQLite and on PostgreSQL: a soft bounce is recorded
    (not suppressed: one alone), its repeat is not; an untagged event matches nothing."""
    tag = make_tag(SECRET.encode(), sent_to(database))
    policy = Policy(database, BouncesSettings(), [SECRET.encode()])
    soft = Event("sendgrid", "ev-1", Kind.SOFT, ALICE, tag=tag, status="4.2.2")
    untagged = Event("sendgrid", "ev-2", Kind.HARD, ALICE)
    first = apply_events(database, policy, [soft, untagged], time.time())
    assert [d.verdict for d in first] == [Verdict.SOFT, Verdict.UNMATCHED]
    again = apply_events(database, policy, [soft, untagged], time.time())
    assert [d.verdict for d in again] == [Verdict.REPEATED, Verdict.REPEATED]
    assert database.suppressions.get("main", ALICE) is None
    assert database.bounces.counts(14, "main").get(Kind.SOFT, 0) == 1
    # Our Message-ID alone proves nothing (anyone who saw the message can quote it): held for
    # review, as a mailed report matched only by Message-ID is, and nobody suppressed.
    quoted = Event("mailgun", "ev-3", Kind.HARD, ALICE, message_id="<14.alice@news.example.org>")
    (held,) = apply_events(database, policy, [quoted], time.time())
    assert held.verdict is Verdict.HELD
    assert database.suppressions.get("main", ALICE) is None
    assert [h.report for h in database.bounces.held()] == ["mailgun:ev-3"]
    # Pruned by age: ids seen long ago go (a replay that old fails its timestamp).
    assert database.webhook_events.prune(time.time() + 1) == 3


def test_a_malformed_key_stops_serve_with_the_variable_named(project: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["serve", "--port", "0"],
        env={"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_WEBHOOK_RESEND_SECRET": "not-a-secret"},
    )
    assert result.exit_code == 1
    assert "NEWSLETTER_WEBHOOK_RESEND_SECRET must start with whsec_" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


MAILGUN_KEY = "key-mailgun-test-signing-0123456789"
POSTMARK_PASSWORD = "postmark-test-password-0123456789"


@pytest.fixture
def more(project: Path) -> Iterator[RunningService]:
    with running_service(
        project,
        NEWSLETTER_WEBHOOK_MAILGUN_KEY=MAILGUN_KEY,
        NEWSLETTER_WEBHOOK_POSTMARK_PASSWORD=POSTMARK_PASSWORD,
    ) as running:
        yield running


def postmark_bounce(tag: str, kind: str = "HardBounce") -> bytes:
    """Postmark's documented bounce webhook sample, our tag in Metadata."""
    return json.dumps(
        {
            "RecordType": "Bounce",
            "MessageStream": "outbound",
            "ID": 4323372036854775807,
            "Type": kind,
            "TypeCode": 1,
            "Name": "Hard bounce",
            "Tag": "Test",
            "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
            "Metadata": {"newsletter_tag": tag},
            "ServerID": 23,
            "Description": "The server was unable to deliver your message (ex: unknown user).",
            "Details": "Test bounce details",
            "Email": ALICE,
            "From": "sender@example.com",
            "BouncedAt": "2019-11-05T16:33:54.9070259Z",
        }
    ).encode()


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {token}", "content-type": "application/json"}


def mailgun_failure(tag: str, stamp: int | None = None, key: str = MAILGUN_KEY) -> bytes:
    """Mailgun's documented permanent-failure sample, signed now, our tag in user-variables."""
    ts = str(int(time.time()) if stamp is None else stamp)
    token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
    mac = hmac.new(key.encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    return json.dumps(
        {
            "signature": {"timestamp": ts, "token": token, "signature": mac},
            "event-data": {
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
                "tags": ["my_tag_1"],
            },
        }
    ).encode()


def test_a_postmark_bounce_needs_the_credentials_and_applies_once(more: RunningService) -> None:
    tag = tag_for_alice(more)
    body = postmark_bounce(tag)
    url = f"{more.url}/webhooks/postmark"
    for headers in (basic("postmark", "guess"), basic("other", POSTMARK_PASSWORD), {}):
        answer = httpx.post(url, content=body, headers=headers)
        assert (answer.status_code, answer.text) == (401, "refused\n")
    assert more.wait_for_log("webhook postmark refused: the basic-auth credentials")
    assert stored(more) == ([], [])
    for _ in range(2):
        answer = httpx.post(url, content=body, headers=basic("postmark", POSTMARK_PASSWORD))
        assert answer.status_code == 200
    assert stored(more) == (
        [("main", ALICE, "bounced")],
        [("postmark:Bounce:4323372036854775807", "hard", "webhook:postmark")],
    )


def test_a_mailgun_failure_is_verified_fresh_and_applied_once(more: RunningService) -> None:
    tag = tag_for_alice(more)
    url = f"{more.url}/webhooks/mailgun"
    forged = mailgun_failure(tag, key="not-the-key")
    assert httpx.post(url, content=forged).status_code == 401
    assert more.wait_for_log("webhook mailgun refused: the signature does not verify")
    stale = mailgun_failure(tag, int(time.time()) - 3600)
    assert httpx.post(url, content=stale).status_code == 401
    assert httpx.post(url, content=b"[not json").status_code == 400
    assert stored(more) == ([], [])
    body = mailgun_failure(tag)
    assert httpx.post(url, content=body).status_code == 200
    assert httpx.post(url, content=body).status_code == 200  # a retry
    assert stored(more) == (
        [("main", ALICE, "bounced")],
        [("mailgun:G9Bn5sl1TC6nu79C8C0bwg", "hard", "webhook:mailgun")],
    )


@pytest.mark.parametrize(
    ("relay", "field", "echoed"),
    [
        ("sendgrid", "X-SMTPAPI", lambda v: json.loads(v)["unique_args"]["newsletter_tag"]),
        ("mailgun", "X-Mailgun-Variables", lambda v: json.loads(v)["newsletter_tag"]),
        ("postmark", "X-PM-Metadata-newsletter_tag", lambda v: v),
        ("ses", "X-SES-MESSAGE-TAGS", lambda v: v.removeprefix("newsletter_tag=")),
    ],
)
def test_with_a_relay_set_each_message_carries_the_tag_its_events_echo(
    project: Path, relay: str, field: str, echoed: Callable[[str], str]
) -> None:
    """The send's side of the tie: with [webhooks] relay, the message of an outbox row carries
    the header that relay echoes, holding the row's signed tag; without it, nothing extra."""
    env = {"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_WEBHOOKS__RELAY": relay}
    settings = load_settings(project / "newsletter.toml", environ=env)
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    factory = MessageFactory(rendered, settings, "main", secret=SECRET.encode())
    data = factory.build(Subscriber(envelope=ALICE, name="Alice"), row_id=42).data
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert read_tag(SECRET.encode(), echoed(str(message[field]))) == 42
    plain = load_settings(project / "newsletter.toml", environ={"NEWSLETTER_SECRET": SECRET})
    factory = MessageFactory(rendered, plain, "main", secret=SECRET.encode())
    data = factory.build(Subscriber(envelope=ALICE, name="Alice"), row_id=42).data
    assert field.encode() not in data


BOB = "bob@example.net"


def test_a_mailgun_signature_reposted_over_another_readers_complaint_is_refused(
    more: RunningService,
) -> None:
    """Issue 40, point 1, through the site: the signature object of Alice's real failure,
    reposted within the tolerance over `{"event": "complained", "id": "anything-new"}` with
    Bob's tag, is answered 401 and suppresses nobody; Mailgun's retry of the very body is
    answered 200 and counted once."""
    with open_database(more.settings.database_target) as database:
        ids = {ALICE: "<14.alice@news.example.org>", BOB: "<14.bob@news.example.org>"}
        plan(database, 14, "main", [ALICE, BOB], ids)
        tags = {}
        for row in due(database, 14, "main"):
            record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
            tags[row.recipient] = make_tag(SECRET.encode(), row.id)
    url = f"{more.url}/webhooks/mailgun"
    body = mailgun_failure(tags[ALICE])
    assert httpx.post(url, content=body).status_code == 200
    forged = {
        "signature": json.loads(body)["signature"],
        "event-data": {
            "event": "complained",
            "id": "anything-new",
            "recipient": BOB,
            "user-variables": {"newsletter_tag": tags[BOB]},
        },
    }
    answer = httpx.post(url, content=json.dumps(forged).encode())
    assert (answer.status_code, answer.text) == (401, "refused\n")
    assert more.wait_for_log("the signature's token came with another request before")
    assert httpx.post(url, content=body).status_code == 200  # Mailgun's retry
    assert stored(more) == (
        [("main", ALICE, "bounced")],
        [("mailgun:G9Bn5sl1TC6nu79C8C0bwg", "hard", "webhook:mailgun")],
    )
    with open_database(more.settings.database_target) as database:
        assert database.suppressions.get("main", BOB) is None
