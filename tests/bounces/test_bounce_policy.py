"""Reports applied to a real outbox (SQLite, then PostgreSQL): who is suppressed, when, never
twice, and never on a report that proves nothing (DKIM keys served by a real DNS on loopback)."""

from __future__ import annotations

import re

import pytest

from newsletter.bounces.kinds import Kind
from newsletter.bounces.origin import DkimKeys, speaks_for
from newsletter.bounces.policy import Policy, Verdict, breach
from newsletter.bounces.reports import read_report
from newsletter.bounces.verp import TAG_HEADER, make_tag, return_path
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database
from newsletter.models import DeliveryStatus
from support.database import due, plan, record
from support.dnszone import closed_port
from support.dsn import SELECTOR, complaint, dsn, vacation
from support.providers import Provider

SECRET = b"policy-test-secret-0123456789"
READERS = ["ann@example.org", "ben@example.org", "cat@example.org"]


@pytest.fixture
def database(database: Database) -> Database:
    """The shared outbox fixture (SQLite, then PostgreSQL) with issues 12-14 sent to READERS."""
    for issue in (12, 13, 14):
        plan(
            database,
            issue,
            "main",
            READERS,
            {r: f"<{issue}.{r}@news.example.org>" for r in READERS},
        )
        for row in due(database, issue, "main"):
            record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    return database


def row_id(database: Database, issue: int, recipient: str) -> int:
    return next(r.id for r in database.deliveries.rows(issue, "main") if r.recipient == recipient)


def original(database: Database, issue: int, recipient: str, *, secret: bytes = SECRET) -> bytes:
    """The message as the reader's server received it."""
    tag = make_tag(secret, row_id(database, issue, recipient))
    sender = return_path("bounces@news.example.org", tag)
    return (
        f"Return-Path: <{sender}>\r\nDelivered-To: {recipient}\r\n"
        f"From: News <news@news.example.org>\r\nTo: {recipient}\r\nSubject: Issue {issue}\r\n"
        f"Message-ID: <{issue}.{recipient}@news.example.org>\r\n{TAG_HEADER}: {tag}\r\n\r\nHi\r\n"
    ).encode()


def policy(
    database: Database, secret: bytes | None = SECRET, keys: DkimKeys | None = None, **config: float
) -> Policy:
    settings = BouncesSettings.model_validate(config)
    return Policy(database, settings, [secret] if secret else [], keys)


def test_a_hard_bounce_suppresses_once(database: Database) -> None:
    report = read_report(dsn(original(database, 14, "ann@example.org")))
    first = policy(database).apply(report)
    assert first.verdict is Verdict.HARD
    assert [(s.list, s.address, s.reason) for s in first.suppressed] == [
        ("main", "ann@example.org", "bounced")
    ]
    assert database.suppressions.get("main", "ann@example.org").source == "bounced"  # type: ignore[union-attr]
    again = policy(database).apply(report)
    assert again.verdict is Verdict.REPEATED
    assert again.suppressed == ()
    assert database.bounces.counts(14, "main").get(Kind.HARD, 0) == 1


def test_a_complaint_suppresses(database: Database) -> None:
    decision = policy(database).apply(
        read_report(complaint(original(database, 13, "ben@example.org")))
    )
    assert decision.verdict is Verdict.COMPLAINT
    assert [s.reason for s in decision.suppressed] == ["complained"]
    assert database.bounces.counts(13, "main").get(Kind.COMPLAINT, 0) == 1


def test_soft_bounces_suppress_after_three_in_a_row(database: Database) -> None:
    soft = {"status": "4.2.2", "diagnostic": "452 4.2.2 Mailbox full"}
    rule = policy(database)
    for issue in (12, 13):
        decision = rule.apply(
            read_report(dsn(original(database, issue, "cat@example.org"), **soft))
        )
        assert decision.verdict is Verdict.SOFT
        assert decision.suppressed == ()
    assert not database.suppressions.contains("main", "cat@example.org")
    last = rule.apply(read_report(dsn(original(database, 14, "cat@example.org"), **soft)))
    assert [s.reason for s in last.suppressed] == ["bounced"]
    assert database.bounces.soft_streak("main", "cat@example.org", 14) == 3


def test_an_issue_that_did_not_bounce_breaks_the_streak(database: Database) -> None:
    soft = {"status": "4.2.2", "diagnostic": "452 4.2.2 Mailbox full"}
    rule = policy(database, soft_limit=2)
    rule.apply(read_report(dsn(original(database, 12, "cat@example.org"), **soft)))
    decision = rule.apply(read_report(dsn(original(database, 14, "cat@example.org"), **soft)))
    assert decision.suppressed == ()  # issue 13 reached the reader
    assert database.bounces.soft_streak("main", "cat@example.org", 14) == 1


def test_auto_replies_and_delays_never_count(database: Database) -> None:
    rule = policy(database)
    away = rule.apply(read_report(vacation(original(database, 14, "ann@example.org"))))
    late = rule.apply(
        read_report(
            dsn(original(database, 14, "ben@example.org"), status="4.4.7", action="delayed")
        )
    )
    assert away.verdict is Verdict.AUTO_REPLY
    assert late.verdict is Verdict.DELAYED
    assert database.suppressions.all() == []
    assert set(database.bounces.counts(14, "main")) == {"auto-reply", "delayed"}


def test_a_forged_tag_matches_nothing_and_a_message_id_alone_is_held(database: Database) -> None:
    forged = original(database, 14, "ann@example.org", secret=b"someone-else-entirely-123")
    decision = policy(database).apply(read_report(dsn(forged)), dsn(forged))
    assert decision.verdict is Verdict.HELD  # matched by its Message-ID, sender unproven
    assert not decision.verdict.filed  # left in the mailbox
    assert [r.recipient for r in decision.rows] == ["ann@example.org"]
    assert database.suppressions.all() == []
    assert database.bounces.counts(14, "main") == {}  # counts towards no rate and no streak
    (held,) = database.bounces.held()
    assert (held.delivery.recipient, held.kind, held.status) == ("ann@example.org", "hard", "5.1.1")
    assert held.sender == "mailer-daemon@mx.example.net"
    unknown_id = forged.replace(b"<14.ann@", b"<99.ann@")
    decision = policy(database).apply(read_report(dsn(unknown_id, to="x@example.org")))
    assert decision.verdict is Verdict.UNMATCHED


@pytest.mark.slow
def test_without_the_secret_a_proven_sender_still_matches(
    database: Database, provider: Provider
) -> None:
    raw = provider.sign(
        dsn(
            original(database, 14, "ben@example.org"), sender_address="MAILER-DAEMON@mx.example.org"
        ),
        "example.org",
    )
    decision = policy(database, secret=None, keys=provider.keys).apply(read_report(raw), raw)
    assert decision.verdict is Verdict.HARD
    assert [s.address for s in decision.suppressed] == ["ben@example.org"]
    assert provider.resolver.queries == [(f"{SELECTOR}._domainkey.example.org", "TXT")]


def untagged(database: Database, issue: int, recipient: str) -> bytes:
    """The original as a relay that strips the return path and the tag header quotes it."""
    raw = original(database, issue, recipient)
    return b"\r\n".join(
        line for line in raw.split(b"\r\n") if not line.startswith((b"X-Newsletter-Tag", b"Return"))
    )


def quoting_everyone(database: Database, first: str, sender: str) -> bytes:
    """A DSN about `first` whose References name every reader's Message-ID of issue 14."""
    raw = dsn(untagged(database, 14, first), sender_address=sender, to="news@news.example.org")
    ids = " ".join(f"<14.{r}@news.example.org>" for r in READERS)
    return raw.replace(b"Auto-Submitted:", f"References: {ids}\r\nAuto-Submitted:".encode(), 1)


@pytest.mark.slow
def test_one_mail_acts_on_one_row_however_many_ids_it_quotes(
    database: Database, provider: Provider
) -> None:
    raw = provider.sign(
        quoting_everyone(database, "cat@example.org", "postmaster@example.org"), "example.org"
    )
    report = read_report(raw)
    assert len([m for m in report.message_ids if m.startswith("<14.")]) == 3
    decision = policy(database, keys=provider.keys).apply(report, raw)
    assert decision.verdict is Verdict.HARD
    assert [s.address for s in decision.suppressed] == ["cat@example.org"]
    assert [s.address for s in database.suppressions.all()] == ["cat@example.org"]


def test_one_mail_with_several_verified_tags_acts_on_the_first(database: Database) -> None:
    ann, ben = original(database, 14, "ann@example.org"), original(database, 14, "ben@example.org")
    both = dsn(ann).replace(b"--dsn--", ben.split(b"\r\n\r\n")[0] + b"\r\n--dsn--")
    decision = policy(database).apply(read_report(both), both)
    assert [s.address for s in decision.suppressed] == ["ann@example.org"]
    assert [s.address for s in database.suppressions.all()] == ["ann@example.org"]


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("a stranger's own domain, signed", "does not speak for ann@example.org"),
        ("the reader's mail system, unsigned", "no DKIM signature of it verifies"),
        ("the reader's mail system, altered after signing", "no DKIM signature of it verifies"),
        ("signed by another domain", "no DKIM signature of it verifies"),
        ("signed over part of the body (l=)", "no DKIM signature of it verifies"),
        ("two From lines", "it has 2 From lines"),
        ("about someone else", "it is about zed@example.org, but the message it quotes went to"),
    ],
)
@pytest.mark.slow
def test_an_unproven_report_is_held_and_suppresses_nobody(
    database: Database, provider: Provider, case: str, why: str
) -> None:
    home = "MAILER-DAEMON@mx.example.org"
    plain = dsn(untagged(database, 14, "ann@example.org"), sender_address=home)
    raw = {
        "a stranger's own domain, signed": provider.sign(
            dsn(
                untagged(database, 14, "ann@example.org"),
                sender_address="mailer-daemon@stranger.example",
            ),
            "stranger.example",
        ),
        "the reader's mail system, unsigned": plain,
        "the reader's mail system, altered after signing": provider.sign(
            plain, "example.org"
        ).replace(b"User unknown", b"User unknowN"),
        "signed by another domain": provider.sign(plain, "example.com"),
        "signed over part of the body (l=)": provider.sign(plain, "example.org", length=True),
        "two From lines": provider.sign(
            plain.replace(b"From:", b"From: mailer-daemon@example.org\r\nFrom:", 1), "example.org"
        ),
        "about someone else": provider.sign(
            plain.replace(b"822; ann@", b"822; zed@").replace(b"822;ann@", b"822;zed@"),
            "example.org",
        ),
    }[case]
    decision = policy(database, keys=provider.keys).apply(read_report(raw), raw)
    assert decision.verdict is Verdict.HELD
    assert why in decision.held
    assert database.suppressions.all() == []
    assert [h.reason for h in database.bounces.held()] == [decision.held]
    # The keys of a domain of the mail's choosing are never asked for.
    assert all("stranger" not in name for name, _ in provider.resolver.queries)


def test_a_held_report_waits_for_the_editor(database: Database, provider: Provider) -> None:
    rule = policy(database, keys=provider.keys)
    raws = [
        dsn(untagged(database, 14, r), sender_address="mailer-daemon@elsewhere.example")
        for r in ("ann@example.org", "ben@example.org")
    ]
    reports = [read_report(raw) for raw in raws]
    for _ in range(2):  # read twice: held once, still held, nothing recorded
        assert [rule.apply(r, raw).verdict for r, raw in zip(reports, raws, strict=True)] == [
            Verdict.HELD
        ] * 2
    ann, ben = database.bounces.held()
    accepted = rule.accept(ann.id)
    assert accepted is not None
    assert [(s.address, s.reason) for s in accepted[1]] == [("ann@example.org", "bounced")]
    assert rule.accept(ann.id) is None  # no longer held
    assert rule.accept(9999) is None
    assert database.bounces.decide(ben.id, "dismissed")
    assert not database.bounces.decide(ben.id, "dismissed")
    assert database.bounces.held() == []
    # Next run: both mails are settled and filed, and nothing more happens.
    after = [rule.apply(r, raw) for r, raw in zip(reports, raws, strict=True)]
    assert [d.verdict for d in after] == [Verdict.REPEATED, Verdict.DISMISSED]
    assert all(d.verdict.filed for d in after)
    assert [s.address for s in database.suppressions.all()] == ["ann@example.org"]
    assert database.bounces.counts(14, "main") == {"hard": 1}


@pytest.mark.parametrize("decision", ["accepted", "dismissed"])
def test_a_decision_on_a_held_report_never_carries_over_to_another_row(
    database: Database, decision: str
) -> None:
    """A mail's key is its own Message-ID, which its sender writes: reusing the key of a report
    the editor accepted (or dismissed) must not act on (or file) a report about someone else."""
    rule = policy(database)
    first = dsn(untagged(database, 14, "ann@example.org"), sender_address="mailer-daemon@x.example")
    rule.apply(read_report(first), first)
    (held,) = database.bounces.held()
    if decision == "accepted":
        assert rule.accept(held.id) is not None
    else:
        assert database.bounces.decide(held.id, "dismissed")
    key = re.search(rb"Message-ID: <[^>]+@mx\.example\.net>", first)
    assert key is not None
    other = dsn(untagged(database, 14, "ben@example.org"), sender_address="mailer-daemon@x.example")
    other = re.sub(rb"Message-ID: <[^>]+@mx\.example\.net>", key.group(), other)
    assert read_report(other).key == read_report(first).key
    again = rule.apply(read_report(other), other)
    assert again.verdict is Verdict.HELD
    assert [r.recipient for r in again.rows] == ["ben@example.org"]
    assert not database.suppressions.contains("main", "ben@example.org")
    assert [h.delivery.recipient for h in database.bounces.held()] == ["ben@example.org"]


@pytest.mark.slow
def test_a_report_held_while_dns_was_down_is_applied_once_it_answers(
    database: Database, provider: Provider
) -> None:
    raw = provider.sign(
        dsn(untagged(database, 14, "ann@example.org"), sender_address="postmaster@example.org"),
        "example.org",
    )
    offline = policy(database, keys=DkimKeys([("127.0.0.1", closed_port())], timeout=0.3))
    assert offline.apply(read_report(raw), raw).verdict is Verdict.HELD
    decision = policy(database, keys=provider.keys).apply(read_report(raw), raw)
    assert decision.verdict is Verdict.HARD
    assert database.bounces.held() == []
    assert [h.state for h in database.bounces.held("accepted")] == ["accepted"]


def test_a_providers_feedback_loop_speaks_for_its_readers(
    database: Database, provider: Provider
) -> None:
    reader = "li.lei@ymail.com"
    plan(database, 14, "main", [reader], {reader: "<14.ymail@news.example.org>"})
    (row,) = [r for r in due(database, 14, "main") if r.recipient == reader]
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    quoted = (
        f"From: News <news@news.example.org>\r\nTo: {reader}\r\nSubject: Issue 14\r\n"
        "Message-ID: <14.ymail@news.example.org>\r\n\r\nHi\r\n"
    ).encode()
    redacted = complaint(quoted, sender_address="feedback@arf.mail.yahoo.com").replace(
        f"Original-Rcpt-To: <{reader}>".encode(), b"Original-Rcpt-To: <>"
    )
    raw = provider.sign(redacted, "yahoo.com")
    decision = policy(database, keys=provider.keys).apply(read_report(raw), raw)
    assert decision.verdict is Verdict.COMPLAINT
    assert [s.address for s in decision.suppressed] == [reader]


@pytest.mark.parametrize(
    ("sender", "recipient", "speaks"),
    [
        ("ann@example.org", "ann@example.org", True),
        ("mailer-daemon@example.org", "ann@example.org", True),
        ("postmaster@mx.example.org", "ann@example.org", True),
        ("mailer-daemon@example.org", "ann@mail.example.org", True),
        ("mailer-daemon@googlemail.com", "ann@gmail.com", True),
        ("feedback@arf.mail.yahoo.com", "ann@aol.com", True),
        ("staff@hotmail.com", "ann@outlook.com", True),
        ("ben@example.org", "ann@example.org", False),  # another reader of the same domain
        ("someone@gmail.com", "ann@gmail.com", False),  # anyone can have a Gmail address
        ("feedback@arf.mail.yahoo.com", "ann@gmail.com", False),
        ("mailer-daemon@example.net", "ann@example.org", False),
        ("mailer-daemon@notexample.org", "ann@example.org", False),
        ("feedback@gmail.com", "ann@gmail.com", False),
    ],
)
def test_who_speaks_for_a_mailbox(sender: str, recipient: str, speaks: bool) -> None:
    assert bool(speaks_for(sender, recipient)) is speaks


def test_a_refusal_at_send_time_is_a_hard_bounce(database: Database) -> None:
    rule = policy(database)
    (ann,) = database.deliveries.by_id([row_id(database, 14, "ann@example.org")])
    (ben,) = database.deliveries.by_id([row_id(database, 14, "ben@example.org")])
    dead = rule.refused(ann, 550, "5.1.1 <ann@example.org>: Recipient address rejected")
    assert dead is not None
    assert dead.reason == "bounced"
    assert rule.refused(ann, 550, "5.1.1 again") is None  # once per row
    assert rule.refused(ben, 550, "5.7.1 Message rejected as spam") is None  # not the address
    assert database.bounces.counts(14, "main").get(Kind.SOFT, 0) == 1


def test_thresholds() -> None:
    config = BouncesSettings(min_sample=100)
    assert breach(config, 99, 99, 99) is None  # too few to judge
    assert breach(config, 100, 5, 0) is None
    assert "hard bounces are at 6.0% of 100" in (breach(config, 100, 6, 0) or "")
    assert breach(config, 1000, 0, 1) is None
    assert "complaints are at 0.20%" in (breach(config, 1000, 0, 2) or "")


def test_a_tag_signed_before_the_secret_was_rotated_still_matches(database: Database) -> None:
    old = original(database, 14, "ann@example.org").replace(b"<14.ann@", b"<gone@")
    rotated = Policy(database, BouncesSettings(), [b"the-new-secret-0123456789", SECRET])
    assert rotated.apply(read_report(dsn(old))).verdict is Verdict.HARD
    assert (
        Policy(database, BouncesSettings(), [b"the-new-secret-0123456789"]).match(
            read_report(dsn(old))
        )
        is None
    )
