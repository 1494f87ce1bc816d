"""The reply table: SMTP codes and texts in, an outcome and its scope out."""

from __future__ import annotations

import pytest

from newsletter.send.replies import Outcome, Scope, classify, reply_text


@pytest.mark.parametrize(
    ("code", "reply", "stage", "outcome", "scope"),
    [
        (550, "5.4.5 Daily user sending quota exceeded", "data", Outcome.STOPPED, Scope.ACCOUNT),
        (454, "4.7.0 Throttling failure", "rcpt", Outcome.THROTTLED, Scope.ACCOUNT),
        (421, "4.7.0 Try again later, closing", "mail", Outcome.RETRY, Scope.CONNECTION),
        (
            421,
            "4.7.28 rate limited, too many messages",
            "data",
            Outcome.THROTTLED,
            Scope.ACCOUNT,
        ),
        (553, "5.7.1 sender not allowed", "mail", Outcome.STOPPED, Scope.ACCOUNT),
        (451, "4.3.0 try later", "rcpt", Outcome.DEFERRED, Scope.RECIPIENT),
        (550, "5.1.1 user unknown", "rcpt", Outcome.REJECTED, Scope.RECIPIENT),
    ],
)
def test_classify_by_scope(
    code: int, reply: str, stage: str, outcome: Outcome, scope: Scope
) -> None:
    result = classify(code, reply, stage)
    assert (result.outcome, result.scope) == (outcome, scope)


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
