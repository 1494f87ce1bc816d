"""The reply table: SMTP codes and texts in, an outcome and its scope out."""

from __future__ import annotations

import pytest

from newsletter.send.replies import Outcome, Scope, classify


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
