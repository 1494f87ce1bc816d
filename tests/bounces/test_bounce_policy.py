"""Reports applied to a real SQLite outbox: who is suppressed, when, and never twice."""

from __future__ import annotations

import pytest

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict, breach
from newsletter.bounces.reports import read_report
from newsletter.bounces.verp import TAG_HEADER, make_tag, return_path
from newsletter.models import DeliveryStatus
from newsletter.outbox import Outbox
from newsletter.settings import BouncesSettings
from support.dsn import complaint, dsn, vacation

SECRET = b"policy-test-secret-0123456789"
READERS = ["ann@example.org", "ben@example.org", "cat@example.org"]


@pytest.fixture
def outbox(outbox: Outbox) -> Outbox:
    """The shared outbox fixture (SQLite, then PostgreSQL) with issues 12-14 sent to READERS."""
    for issue in (12, 13, 14):
        outbox.plan(issue, "main", READERS, {r: f"<{issue}.{r}@news.example.org>" for r in READERS})
        for row in outbox.due(issue, "main"):
            outbox.record(row.id, DeliveryStatus.SENT, code=250, reply="ok")
    return outbox


def row_id(outbox: Outbox, issue: int, recipient: str) -> int:
    return next(r.id for r in outbox.rows(issue, "main") if r.recipient == recipient)


def original(outbox: Outbox, issue: int, recipient: str, *, secret: bytes = SECRET) -> bytes:
    """The message as the reader's server received it."""
    tag = make_tag(secret, row_id(outbox, issue, recipient))
    sender = return_path("bounces@news.example.org", tag)
    return (
        f"Return-Path: <{sender}>\r\nDelivered-To: {recipient}\r\n"
        f"From: News <news@news.example.org>\r\nTo: {recipient}\r\nSubject: Issue {issue}\r\n"
        f"Message-ID: <{issue}.{recipient}@news.example.org>\r\n{TAG_HEADER}: {tag}\r\n\r\nHi\r\n"
    ).encode()


def policy(outbox: Outbox, secret: bytes | None = SECRET, **config: float) -> Policy:
    return Policy(outbox, BouncesSettings.model_validate(config), [secret] if secret else [])


def test_a_hard_bounce_suppresses_once(outbox: Outbox) -> None:
    report = read_report(dsn(original(outbox, 14, "ann@example.org")))
    first = policy(outbox).apply(report)
    assert first.verdict is Verdict.HARD
    assert [(s.list, s.address, s.reason) for s in first.suppressed] == [
        ("main", "ann@example.org", "bounced")
    ]
    assert outbox.suppression("main", "ann@example.org").source == "bounced"  # type: ignore[union-attr]
    again = policy(outbox).apply(report)
    assert again.verdict is Verdict.REPEATED
    assert again.suppressed == ()
    assert outbox.bounce_counts(14, "main").get(Kind.HARD, 0) == 1


def test_a_complaint_suppresses(outbox: Outbox) -> None:
    decision = policy(outbox).apply(read_report(complaint(original(outbox, 13, "ben@example.org"))))
    assert decision.verdict is Verdict.COMPLAINT
    assert [s.reason for s in decision.suppressed] == ["complained"]
    assert outbox.bounce_counts(13, "main").get(Kind.COMPLAINT, 0) == 1


def test_soft_bounces_suppress_after_three_in_a_row(outbox: Outbox) -> None:
    soft = {"status": "4.2.2", "diagnostic": "452 4.2.2 Mailbox full"}
    rule = policy(outbox)
    for issue in (12, 13):
        decision = rule.apply(read_report(dsn(original(outbox, issue, "cat@example.org"), **soft)))
        assert decision.verdict is Verdict.SOFT
        assert decision.suppressed == ()
    assert not outbox.is_suppressed("main", "cat@example.org")
    last = rule.apply(read_report(dsn(original(outbox, 14, "cat@example.org"), **soft)))
    assert [s.reason for s in last.suppressed] == ["bounced"]
    assert outbox.soft_streak("main", "cat@example.org", 14) == 3


def test_an_issue_that_did_not_bounce_breaks_the_streak(outbox: Outbox) -> None:
    soft = {"status": "4.2.2", "diagnostic": "452 4.2.2 Mailbox full"}
    rule = policy(outbox, soft_limit=2)
    rule.apply(read_report(dsn(original(outbox, 12, "cat@example.org"), **soft)))
    decision = rule.apply(read_report(dsn(original(outbox, 14, "cat@example.org"), **soft)))
    assert decision.suppressed == ()  # issue 13 reached the reader
    assert outbox.soft_streak("main", "cat@example.org", 14) == 1


def test_auto_replies_and_delays_never_count(outbox: Outbox) -> None:
    rule = policy(outbox)
    away = rule.apply(read_report(vacation(original(outbox, 14, "ann@example.org"))))
    late = rule.apply(
        read_report(dsn(original(outbox, 14, "ben@example.org"), status="4.4.7", action="delayed"))
    )
    assert away.verdict is Verdict.AUTO_REPLY
    assert late.verdict is Verdict.DELAYED
    assert outbox.suppressions() == []
    assert set(outbox.bounce_counts(14, "main")) == {"auto-reply", "delayed"}


def test_a_forged_tag_matches_nothing_but_a_message_id_still_does(outbox: Outbox) -> None:
    forged = original(outbox, 14, "ann@example.org", secret=b"someone-else-entirely-123")
    assert policy(outbox).apply(read_report(dsn(forged))).verdict is Verdict.HARD  # Message-ID
    unknown_id = forged.replace(b"<14.ann@", b"<99.ann@")
    decision = policy(outbox).apply(read_report(dsn(unknown_id, to="x@example.org")))
    assert decision.verdict is Verdict.UNMATCHED
    assert outbox.suppressions() == [outbox.suppression("main", "ann@example.org")]


def test_without_the_secret_only_message_ids_match(outbox: Outbox) -> None:
    raw = original(outbox, 14, "ben@example.org")
    decision = policy(outbox, secret=None).apply(read_report(dsn(raw)))
    assert decision.verdict is Verdict.HARD
    assert decision.rows[0].recipient == "ben@example.org"


def test_a_refusal_at_send_time_is_a_hard_bounce(outbox: Outbox) -> None:
    rule = policy(outbox)
    (ann,) = outbox.deliveries_by_id([row_id(outbox, 14, "ann@example.org")])
    (ben,) = outbox.deliveries_by_id([row_id(outbox, 14, "ben@example.org")])
    dead = rule.refused(ann, 550, "5.1.1 <ann@example.org>: Recipient address rejected")
    assert dead is not None
    assert dead.reason == "bounced"
    assert rule.refused(ann, 550, "5.1.1 again") is None  # once per row
    assert rule.refused(ben, 550, "5.7.1 Message rejected as spam") is None  # not the address
    assert outbox.bounce_counts(14, "main").get(Kind.SOFT, 0) == 1


def test_thresholds() -> None:
    config = BouncesSettings(min_sample=100)
    assert breach(config, 99, 99, 99) is None  # too few to judge
    assert breach(config, 100, 5, 0) is None
    assert "hard bounces are at 6.0% of 100" in (breach(config, 100, 6, 0) or "")
    assert breach(config, 1000, 0, 1) is None
    assert "complaints are at 0.20%" in (breach(config, 1000, 0, 2) or "")


def test_a_tag_signed_before_the_secret_was_rotated_still_matches(outbox: Outbox) -> None:
    old = original(outbox, 14, "ann@example.org").replace(b"<14.ann@", b"<gone@")
    rotated = Policy(outbox, BouncesSettings(), [b"the-new-secret-0123456789", SECRET])
    assert rotated.apply(read_report(dsn(old))).verdict is Verdict.HARD
    assert (
        Policy(outbox, BouncesSettings(), [b"the-new-secret-0123456789"]).match(
            read_report(dsn(old))
        )
        == []
    )
