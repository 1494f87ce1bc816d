"""SMTP replies in, outcomes out: the reply table, what a server's answer to a message's MAIL,
RCPT, DATA or body means for that message, by scope:

    recipient   4xx -> DEFERRED; 5xx about the address      (this message only; a bounce:
                (5.1.x, 5.2.x, 5.4.x, 5.7.x; to RCPT also   bounces/policy.py says whether
                a bare 550/551/553, 5.3.x, 5.5.x) -> REJECTED  it suppresses)
    message     5xx about the message: content (5.6.x),     (this message only, the reader
                protocol (5.5.x), system (5.3.x), 5.2.3     untouched; `breaker_threshold`
                too long, or a bare code -> FAILED          in a row stop the run)
    connection  421 -> RETRY                                (reconnect, try again)
    destination a provider's throttle (Gmail 4.7.28, Yahoo      (that recipient domain rests,
                TSS04, Microsoft 4.7.650/651, 4.2.1 "rate"),  the rest of the list goes on:
                a 421/450/451 about the rate after MAIL       pacing.Destinations)
                -> THROTTLED
    account     454, throttling 4xx to MAIL -> THROTTLED    (slow down)
                550 5.4.5 daily quota, sender refused -> STOPPED (end the run)

A reply that refuses the session itself (its greeting, EHLO, STARTTLS or AUTH) is about no
message, and a connection lost is no reply: faults.py maps those, and calls this table for the
rest. `Outcome`, `Scope`, `Result` and `Stage` are the words both speak.

`reply_text` is the one decoding of a reply's text, whichever code read it (wire.py, or
aiosmtplib at setup): what it returns can always be stored and printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from newsletter.bounces.kinds import STATUS, blames_message, unsure_of_the_address


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
    MESSAGE = "message"
    CONNECTION = "connection"
    DESTINATION = "destination"  # the recipient's domain asked us to slow down
    ACCOUNT = "account"


class Stage(StrEnum):
    """Where a session is: opening it (the first four), then a message's transaction."""

    CONNECT = "connect"  # TCP, implicit TLS and the greeting
    EHLO = "ehlo"
    STARTTLS = "starttls"
    AUTH = "auth"
    MAIL = "mail"
    RCPT = "rcpt"
    DATA = "data"  # the DATA command, up to its 354
    BODY = "body"  # the message's content, up to the reply to its final "."

    @property
    def opening(self) -> bool:
        return self in _OPENING


_OPENING = frozenset({Stage.CONNECT, Stage.EHLO, Stage.STARTTLS, Stage.AUTH})
# The replies that accept each command of a transaction; any other is classified.
_ACCEPTED = {Stage.MAIL: (250,), Stage.RCPT: (250, 251), Stage.DATA: (354,), Stage.BODY: (250,)}


@dataclass(frozen=True)
class Result:
    """What became of one message. `reply` is the server's text (for 250 it holds the queue id)."""

    outcome: Outcome
    scope: Scope
    code: int | None = None
    reply: str = ""
    relay: str = ""  # the relay that answered (smtp.Session names it)

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
# The large providers' throttles, each about the destination (and our IP's standing there):
# Gmail `421 4.7.28 ... rate limited`, `450 4.2.1 ... receiving mail at a rate`; Yahoo
# `421 4.7.0 [TSS04] ... temporarily deferred`; Microsoft `451 4.7.650/4.7.651 ... rate limited`.
_PROVIDER_THROTTLE = re.compile(
    r"\b4\.7\.28\b|\bTSS0\d\b|\b4\.7\.65[01]\b|\b4\.2\.1\b.*\brate\b", re.I
)


def _about_the_destination(code: int, reply: str, stage: Stage) -> bool:
    """A throttle after MAIL is about the recipient's side (454 is the relay's, SES's): that
    domain rests, not the whole run."""
    if not 400 <= code < 500 or stage == Stage.MAIL or code == 454:
        return False
    generic = code in (421, 450, 451) and _THROTTLE.search(reply) is not None
    return generic or _PROVIDER_THROTTLE.search(reply) is not None


def accepts(stage: Stage, code: int) -> bool:
    """Whether `code` accepts the command of `stage` (a transaction's: MAIL to BODY)."""
    return code in _ACCEPTED[stage]


def classify(code: int, reply: str, stage: Stage) -> Result:
    """What a reply that does not accept a transaction's command means for its message. A
    reply while the session opens is no message's: faults.py maps it, never this table."""
    if stage.opening:
        raise ValueError(f"a reply at {stage} is about the session, not a message")
    if 500 <= code < 600 and _QUOTA.search(reply):
        return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
    if _about_the_destination(code, reply, stage):
        return Result(Outcome.THROTTLED, Scope.DESTINATION, code, reply)
    if code == 454 or (400 <= code < 500 and _THROTTLE.search(reply)):
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if code == 421:
        return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)
    if stage == Stage.MAIL:
        # Refusing the sender refuses every message of the run.
        if 500 <= code < 600:
            return Result(Outcome.STOPPED, Scope.ACCOUNT, code, reply)
        return Result(Outcome.THROTTLED, Scope.ACCOUNT, code, reply)
    if 400 <= code < 500:
        return Result(Outcome.DEFERRED, Scope.RECIPIENT, code, reply)
    if 500 <= code < 600:
        if _about_the_message(code, reply, stage):
            return Result(Outcome.FAILED, Scope.MESSAGE, code, reply)
        return Result(Outcome.REJECTED, Scope.RECIPIENT, code, reply)
    return Result(Outcome.RETRY, Scope.CONNECTION, code, reply)


# RFC 5321's replies to RCPT that name the mailbox: unavailable (550), not local (551), its
# name not allowed (553). An old server with no enhanced status codes says "550 no such user".
_MAILBOX_CODES = (550, 551, 553)


def _about_the_message(code: int, reply: str, stage: Stage) -> bool:
    """Whether a 5xx refuses the message rather than its recipient. A content, protocol or
    system refusal (or a bare `554 Transaction failed`) would refuse this message to anyone:
    suppressing the reader for it loses a reader for the message's fault. At RCPT, where the
    command is the address, RFC 5321's mailbox codes with no status and a 5.3.x or 5.5.x
    (Outlook.com refuses a dead mailbox with `550 5.5.0 ... mailbox unavailable`) are the
    recipient's: rejected, and soft (bounces/policy.py), so one does not suppress."""
    if stage == Stage.RCPT and unsure_of_the_address(reply):
        return STATUS.search(reply) is None and code not in _MAILBOX_CODES
    return blames_message(reply)
