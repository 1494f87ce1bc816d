"""SMTP replies in, outcomes out: the one table that says what each reply means for a message.

Every aiosmtplib exception and reply is mapped to an `Outcome` here and nowhere else, by scope:

    recipient   4xx -> DEFERRED, 5xx -> REJECTED          (this message only)
    connection  drop/timeout before DATA's 354 -> RETRY    (reconnect, try again)
                drop/timeout after the 354 -> UNKNOWN      (the server may have it)
    account     454, throttling 421 -> THROTTLED            (slow down)
                550 5.4.5 daily quota, sender refused -> STOPPED (end the run)

`reply_text` is the one decoding of a reply's text, whichever code read it (wire.py, or
aiosmtplib at setup): what it returns can always be stored and printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    SENT = "sent"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    FAILED = "failed"
    RETRY = "retry"
    UNKNOWN = "unknown"
    THROTTLED = "throttled"
    STOPPED = "stopped"


class Scope(StrEnum):
    RECIPIENT = "recipient"
    CONNECTION = "connection"
    ACCOUNT = "account"


@dataclass(frozen=True)
class Result:
    """What became of one message. `reply` is the server's text (for 250 it holds the queue id)."""

    outcome: Outcome
    scope: Scope
    code: int | None = None
    reply: str = ""

    def describe(self) -> str:
        return f"{self.code} {self.reply}".strip() if self.code else self.reply


def reply_text(text: str | bytes) -> str:
    """A server's reply text as it is kept: each byte that is not UTF-8 (a Latin-1 server's
    `Empf\xe4nger`, a raw C1 control) becomes U+FFFD, and so does NUL, which no PostgreSQL
    text can hold. aiosmtplib hands its replies over decoded with surrogateescape (a
    UnicodeEncodeError wherever they are stored or printed): those are decoded again here."""
    if isinstance(text, str):
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate surrogateescape did not make
            raw = text.encode("utf-8", "surrogatepass")
    else:
        raw = text
    return raw.decode("utf-8", "replace").replace("\x00", "\ufffd")


_QUOTA = re.compile(r"\b5\.4\.5\b|daily .*(quota|limit)|quota exceeded", re.IGNORECASE)
_THROTTLE = re.compile(r"throttl|rate limit|too many (messages|connections)|slow down", re.I)


def classify(code: int, reply: str, stage: str) -> Result:
    """Map one SMTP reply that is not success to an outcome; `stage` is mail, rcpt or data."""
    if 500 <= code < 600 and _QUOTA.search(reply):
        return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
    if code == 454 or (400 <= code < 500 and _THROTTLE.search(reply)):
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if code == 421:
        return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)
    if stage == "mail":
        # Refusing the sender refuses every message of the run.
        if 500 <= code < 600:
            return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if 400 <= code < 500:
        return Result(Outcome.DEFERRED, Scope.RECIPIENT, code, reply)
    if 500 <= code < 600:
        return Result(Outcome.REJECTED, Scope.RECIPIENT, code, reply)
    return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)
