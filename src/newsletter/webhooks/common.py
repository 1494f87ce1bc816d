"""What every provider's webhook shares: the Event value, why a request is refused, the checks
of timestamps and bodies, and one event in -> the same Report and policy as `newsletter bounces`.

Order matters: a provider module verifies the request's signature (or credentials) over the raw
body before it reads anything else of it, then the timestamp (a request older than the tolerance
is a replay), and only then parses the events. A refusal carries its reason for the server log;
the answer says only 401 or 400, so a forger learns nothing about which check failed.

An event is tied to its delivery row by the signed VERP tag (bounces/verp.py) that the provider
echoes back (a custom argument, metadata or header named `newsletter_tag`, see each module); an
event with only the Message-ID goes through the same proof rules as a mailed report (policy.py):
without a DKIM-proven sender it is held for review. Each event id is applied once
(outbox/webhookevents.py): providers retry, and a replay within the tolerance changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Decision, Policy, Verdict
from newsletter.bounces.reports import Diagnosis, Report
from newsletter.database import Database
from newsletter.errors import NewsletterError

# A provider's batch (SendGrid posts up to ~1000 events) fits; anything bigger is not theirs.
MAX_BODY = 1 << 20
# The key under which a provider echoes the row's tag (custom args, metadata, tags).
TAG_KEY = "newsletter_tag"
# Event ids are kept this long: providers retry for up to three days (SendGrid 72 h), and a
# Postmark event carries no signed time, so only its id stops a replay.
SEEN_SECONDS = 7 * 86400
# Events applied per request at most: a signed batch cannot hold the outbox for long.
MAX_EVENTS = 1000


# What a send adds (with [webhooks] relay) so the relay echoes the tag in its events: each
# provider's documented way to attach a value over SMTP. A tag is [0-9a-z-] (verp.py), so it
# needs no quoting in JSON or in SES's tag syntax.
ECHO_HEADERS = {
    "sendgrid": 'X-SMTPAPI: {{"unique_args": {{"newsletter_tag": "{tag}"}}}}',
    "postmark": "X-PM-Metadata-newsletter_tag: {tag}",
    "mailgun": 'X-Mailgun-Variables: {{"newsletter_tag": "{tag}"}}',
    "ses": "X-SES-MESSAGE-TAGS: newsletter_tag={tag}",
}


def echo_header(relay: str, tag: str) -> str:
    """The header line (no CRLF) that makes `relay` echo `tag`; "" for a relay that echoes
    X-Newsletter-Tag itself or for none."""
    template = ECHO_HEADERS.get(relay, "")
    return template.format(tag=tag) if template else ""


class RefusedError(NewsletterError):
    """A request that proves nothing. `message` is for the server log only; `status` is all
    the sender is told."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message, hint="Check the provider's webhook key and the server clock.")
        self.status = status


@dataclass(frozen=True)
class Event:
    """One bounce or complaint as a provider reported it. `tag` is the echoed VERP tag ("" if
    none came back), `message_id` our Message-ID with its <> ("" if the provider has only its
    own)."""

    provider: str
    event_id: str
    kind: Kind
    recipient: str
    tag: str = ""
    message_id: str = ""
    status: str = ""
    detail: str = ""


def check_time(stamp: str, now: float, tolerance: int) -> None:
    """Refuse a signed timestamp (Unix seconds) further than `tolerance` from `now`."""
    try:
        moment = int(stamp.strip())
    except ValueError:
        raise RefusedError(f"timestamp {stamp[:40]!r} is not Unix seconds") from None
    if abs(now - moment) > tolerance:
        raise RefusedError(f"timestamp {moment} is {int(now - moment)} s from ours (a replay?)")


def parse_json(body: bytes) -> Any:
    """A verified body's JSON; a body that is not is refused with 400."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RefusedError("the body is not JSON", status=400) from None


def b64_bytes(text: str, what: str) -> bytes:
    """Strict base64 of a signature or key: anything else is a refusal, not a crash."""
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise RefusedError(f"{what} is not base64") from None


def text_of(value: object, limit: int = 500) -> str:
    """A provider's field as bounded text ("" for anything not a string or a number)."""
    return str(value)[:limit] if isinstance(value, str | int | float) else ""


def to_report(event: Event) -> Report:
    """The Report a mailed DSN or ARF would have made, so the same policy applies."""
    return Report(
        key=f"{event.provider}:{event.event_id}",
        kind=event.kind,
        source=f"webhook:{event.provider}",
        findings=(Diagnosis(event.recipient, event.kind, event.status, event.detail),),
        tags=(event.tag,) if event.tag else (),
        message_ids=(event.message_id,) if event.message_id else (),
        subject="",
        sender=event.provider,
        envelope=True,
    )


def apply_events(
    database: Database, policy: Policy, events: list[Event], now: float
) -> list[Decision]:
    """Each event not seen before through the policy; a seen one is REPEATED.

    An event's claim and its application are one transaction: a process killed between two
    statements (or an application that fails) leaves neither, so the provider's retry applies
    it; one left claimed but never applied would be "already counted" for ever."""
    database.webhook_events.prune(now - SEEN_SECONDS)
    decisions = []
    for event in events[:MAX_EVENTS]:
        with database.backend.transaction():
            if database.webhook_events.claim(event.provider, event.event_id, now):
                decisions.append(policy.apply(to_report(event)))
            else:
                decisions.append(Decision(Verdict.REPEATED))
    return decisions
