"""A provider's event is judged by the rule a mailed report is (issue 40, points 2, 3 and 4): a
Mailgun temporary failure is a delay, a status code outranks the provider's permanent label, an
SES complaint of type not-spam or auth-failure is no complaint, as a mailed ARF of that type is
none. Real signed requests through each provider's reader, the policy on both backends."""

from __future__ import annotations

import time
from typing import Any

import pytest

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.reports import read_report
from newsletter.bounces.verp import make_tag
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database
from newsletter.models import DeliveryStatus
from newsletter.webhooks.common import Event, apply_events
from newsletter.webhooks.ses import Ses
from support.database import due, plan, record
from support.dsn import complaint, dsn
from support.hooks import SNS_TOPIC, Sns, mailgun, mailgun_reader

SECRET = b"webhook-kinds-secret-0123456789abcdef"
ALICE = "alice@example.net"


def sent(database: Database, issue: int) -> tuple[str, bytes]:
    """Issue `issue` sent to ALICE on main: the row's tag, and the message as her server had it."""
    message_id = f"<{issue}.alice@news.example.org>"
    plan(database, issue, "main", [ALICE], {ALICE: message_id})
    row = due(database, issue, "main")[0]
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    tag = make_tag(SECRET, row.id)
    original = (
        f"Return-Path: <bounces+{tag}@news.example.org>\r\nDelivered-To: {ALICE}\r\n"
        f"From: news@news.example.org\r\nTo: {ALICE}\r\nSubject: Issue {issue}\r\n"
        f"Message-ID: {message_id}\r\n\r\nHello.\r\n"
    ).encode()
    return tag, original


def mailgun_failed(tag: str, ident: str, severity: str, status: dict[str, Any]) -> dict[str, Any]:
    """Mailgun's documented `failed` event (webhook payload samples), our tag in user-variables."""
    return {
        "event": "failed",
        "id": ident,
        "timestamp": 1521472262.908181,
        "log-level": "warn" if severity == "temporary" else "error",
        "severity": severity,
        "reason": "generic",
        "delivery-status": {"attempt-no": 1, "description": "", **status},
        "message": {"headers": {"to": ALICE, "message-id": "20180319.1@news.example.org"}},
        "recipient": ALICE,
        "recipient-domain": "example.net",
        "user-variables": {"newsletter_tag": tag},
    }


def through_mailgun(database: Database, event_data: dict[str, Any]) -> list[Event]:
    return mailgun_reader(database).read({}, mailgun(event_data), time.time())


def policy(database: Database) -> Policy:
    return Policy(database, BouncesSettings(), [SECRET])


def test_a_greylisted_mailgun_failure_then_its_delivery_is_a_delay_three_issues_running(
    database: Database,
) -> None:
    """4.7.1 greylisting, severity temporary, retry-seconds, then `delivered`, for three issues
    in a row: a delay each time, never a soft bounce, so nobody is suppressed."""
    for issue in (14, 15, 16):
        tag, _ = sent(database, issue)
        greylisted = mailgun_failed(
            tag,
            f"grey-{issue}",
            "temporary",
            {
                "code": 451,
                "enhanced-code": "4.7.1",
                "message": "4.7.1 Greylisted, please try again in 300 seconds",
                "retry-seconds": 600,
            },
        )
        delivered = {**greylisted, "event": "delivered", "id": f"done-{issue}"}
        delivered.pop("severity")
        events = through_mailgun(database, greylisted) + through_mailgun(database, delivered)
        assert [e.kind for e in events] == [Kind.DELAYED]
        (decision,) = apply_events(database, policy(database), events, time.time())
        assert decision.verdict is Verdict.DELAYED
        assert database.bounces.counts(issue, "main").get(Kind.SOFT, 0) == 0
    assert database.suppressions.get("main", ALICE) is None


def test_a_permanent_label_yields_to_the_code_as_a_mailed_dsn_does(database: Database) -> None:
    """Mailgun `failed`/`permanent` with enhanced-code 5.7.1 ("client host blocked using
    Spamhaus"): a policy block of the sender, soft, exactly as a mailed DSN saying 5.7.1 is."""
    tag, original = sent(database, 14)
    spamhaus = "5.7.1 Service unavailable; client host [203.0.113.9] blocked using Spamhaus"
    blocked = mailgun_failed(
        tag, "block-1", "permanent", {"code": 550, "enhanced-code": "5.7.1", "message": spamhaus}
    )
    (event,) = through_mailgun(database, blocked)
    mailed = read_report(dsn(original, status="5.7.1", diagnostic=f"554 {spamhaus}"))
    assert [f.kind for f in mailed.findings] == [event.kind] == [Kind.SOFT]
    (decision,) = apply_events(database, policy(database), [event], time.time())
    assert decision.verdict is Verdict.SOFT
    assert database.suppressions.get("main", ALICE) is None
    # Without a code the label decides: Mailgun's own sample (605, no enhanced code) is hard.
    dead = mailgun_failed(
        tag,
        "dead-1",
        "permanent",
        {"code": 605, "message": "", "description": "Not delivering to previously bounced address"},
    )
    assert [e.kind for e in through_mailgun(database, dead)] == [Kind.HARD]


def ses_complaint(tag: str, feedback_type: str) -> dict[str, Any]:
    """SES's documented complaint notification, our tag in mail.tags."""
    return {
        "eventType": "Complaint",
        "complaint": {
            "complainedRecipients": [{"emailAddress": ALICE}],
            "timestamp": "2017-08-05T00:41:02.669Z",
            "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
            "userAgent": "Mozilla/5.0",
            "complaintFeedbackType": feedback_type,
            "arrivalDate": "2017-08-05T00:41:02.669Z",
        },
        "mail": {
            "timestamp": "2017-08-05T00:40:01.123Z",
            "source": "news@news.example.org",
            "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
            "destination": [ALICE],
            "tags": {"newsletter_tag": [tag]},
        },
    }


@pytest.mark.parametrize(
    ("feedback_type", "complains"),
    [("not-spam", False), ("auth-failure", False), ("abuse", True), ("fraud", True)],
)
def test_an_ses_complaint_and_a_mailed_arf_follow_one_rule_on_the_feedback_type(
    database: Database, feedback_type: str, complains: bool
) -> None:
    tag, original = sent(database, 14)
    sns = Sns()
    reader = Ses((SNS_TOPIC,), 300, sns.fetch)
    body = sns.notification(ses_complaint(tag, feedback_type), f"c-{feedback_type}")
    events = reader.read(sns.headers(), body, time.time())
    arf = complaint(original).replace(
        b"Feedback-Type: abuse", f"Feedback-Type: {feedback_type}".encode()
    )
    mailed = read_report(arf)
    assert (mailed.kind is Kind.COMPLAINT) is complains
    assert ([e.kind for e in events] == [Kind.COMPLAINT]) is complains
    apply_events(database, policy(database), events, time.time())
    found = database.suppressions.get("main", ALICE)
    assert (found.source if found else None) == ("complained" if complains else None)
