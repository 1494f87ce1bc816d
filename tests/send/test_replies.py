"""The reply table: SMTP codes and texts at a transaction's stage in, an outcome and its scope
out. (faults.py's tests feed it from real servers; these pin the table itself.)"""

from __future__ import annotations

import pytest

from newsletter.send.replies import Outcome, Scope, Stage, accepts, classify, reply_text


@pytest.mark.parametrize(
    ("code", "reply", "stage", "outcome", "scope"),
    [
        (
            550,
            "5.4.5 Daily user sending quota exceeded",
            Stage.BODY,
            Outcome.STOPPED,
            Scope.ACCOUNT,
        ),
        (454, "4.7.0 Throttling failure", Stage.RCPT, Outcome.THROTTLED, Scope.ACCOUNT),
        (421, "4.7.0 Try again later, closing", Stage.MAIL, Outcome.RETRY, Scope.CONNECTION),
        # A destination's throttle (issue 34): that domain rests, the run goes on.
        (
            421,
            "4.7.28 rate limited, too many messages",
            Stage.BODY,
            Outcome.THROTTLED,
            Scope.DESTINATION,
        ),
        (
            421,
            "4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume",
            Stage.RCPT,
            Outcome.THROTTLED,
            Scope.DESTINATION,
        ),
        (
            451,
            "4.7.650 The mail server [192.0.2.1] has been temporarily rate limited (S775)",
            Stage.RCPT,
            Outcome.THROTTLED,
            Scope.DESTINATION,
        ),
        (
            450,
            "4.2.1 The user you are trying to contact is receiving mail at a rate that prevents",
            Stage.RCPT,
            Outcome.THROTTLED,
            Scope.DESTINATION,
        ),
        (
            451,
            "4.7.1 rate limit exceeded, slow down",
            Stage.RCPT,
            Outcome.THROTTLED,
            Scope.DESTINATION,
        ),
        # The relay's own: 454 (SES) anywhere, a throttle to MAIL.
        (454, "4.7.0 rate limit exceeded", Stage.RCPT, Outcome.THROTTLED, Scope.ACCOUNT),
        (451, "4.7.28 rate limited", Stage.MAIL, Outcome.THROTTLED, Scope.ACCOUNT),
        # A 5xx block is no throttle (Microsoft's S3150).
        (
            550,
            "5.7.1 Service unavailable; part of their network is on our block list (S3150)",
            Stage.RCPT,
            Outcome.REJECTED,
            Scope.RECIPIENT,
        ),
        (553, "5.7.1 sender not allowed", Stage.MAIL, Outcome.STOPPED, Scope.ACCOUNT),
        (451, "4.1.8 sender domain unresolved", Stage.MAIL, Outcome.THROTTLED, Scope.ACCOUNT),
        (451, "4.3.0 try later", Stage.RCPT, Outcome.DEFERRED, Scope.RECIPIENT),
        (550, "5.1.1 user unknown", Stage.RCPT, Outcome.REJECTED, Scope.RECIPIENT),
        (452, "4.3.1 insufficient storage", Stage.DATA, Outcome.DEFERRED, Scope.RECIPIENT),
        (554, "5.7.1 spam", Stage.BODY, Outcome.REJECTED, Scope.RECIPIENT),
        # About the message, not the address (issue 29): the reader stays, the row fails.
        (554, "5.6.0 Message content rejected", Stage.BODY, Outcome.FAILED, Scope.MESSAGE),
        (554, "Transaction failed", Stage.BODY, Outcome.FAILED, Scope.MESSAGE),
        (500, "", Stage.RCPT, Outcome.FAILED, Scope.MESSAGE),
        (554, "5.5.0 protocol error", Stage.DATA, Outcome.FAILED, Scope.MESSAGE),
        (550, "5.3.0 system error", Stage.DATA, Outcome.FAILED, Scope.MESSAGE),
        (550, "5.5.0 mailbox unavailable", Stage.RCPT, Outcome.REJECTED, Scope.RECIPIENT),
        (552, "5.2.3 message too long", Stage.BODY, Outcome.FAILED, Scope.MESSAGE),
        (552, "5.2.2 mailbox full", Stage.BODY, Outcome.REJECTED, Scope.RECIPIENT),
        (550, "no such user here", Stage.RCPT, Outcome.REJECTED, Scope.RECIPIENT),  # RFC 5321
        (550, "no such user here", Stage.BODY, Outcome.FAILED, Scope.MESSAGE),
        (250, "ok", Stage.DATA, Outcome.RETRY, Scope.CONNECTION),  # not DATA's 354: out of step
    ],
)
def test_classify_by_scope(
    code: int, reply: str, stage: Stage, outcome: Outcome, scope: Scope
) -> None:
    result = classify(code, reply, stage)
    assert (result.outcome, result.scope) == (outcome, scope)


@pytest.mark.parametrize("stage", [Stage.CONNECT, Stage.EHLO, Stage.STARTTLS, Stage.AUTH])
def test_a_reply_while_the_session_opens_is_not_the_tables_to_judge(stage: Stage) -> None:
    # It refuses the session, not a message: faults.py maps it (a 554 greeting once marked the
    # row about to go out `rejected`).
    with pytest.raises(ValueError, match="about the session"):
        classify(554, "5.7.1 no service", stage)


def test_the_replies_that_accept_each_command() -> None:
    assert [c for c in (250, 251, 354) if accepts(Stage.MAIL, c)] == [250]
    assert [c for c in (250, 251, 354) if accepts(Stage.RCPT, c)] == [250, 251]
    assert [c for c in (250, 251, 354) if accepts(Stage.DATA, c)] == [354]
    assert [c for c in (250, 251, 354) if accepts(Stage.BODY, c)] == [250]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (b"Empf\xe4nger unbekannt", "Empf\ufffdnger unbekannt"),  # Latin-1, from the wire
        ("Empf\udce4nger unbekannt", "Empf\ufffdnger unbekannt"),  # aiosmtplib's surrogateescape
        (b"\x9b31m \x9d0;x", "\ufffd31m \ufffd0;x"),  # raw C1 bytes
        (b"a\x00b", "a\ufffdb"),  # NUL: PostgreSQL text cannot hold it
        ("a\ud800b", "a\ufffd\ufffd\ufffdb"),  # a surrogate surrogateescape did not make
        ("收件人不存在 \u009b", "收件人不存在 \u009b"),  # text stays text; display cleans
    ],
)
def test_reply_text_is_always_storable(given: str | bytes, kept: str) -> None:
    assert reply_text(given) == kept
    kept.encode("utf-8")
