"""Mailgun's webhooks: HMAC-SHA256 of timestamp + token with the webhook signing key
(NEWSLETTER_WEBHOOK_MAILGUN_KEY), hex, in the body's `signature` object. The signature is read
and checked before `event-data` is looked at; the timestamp must be within the tolerance.

The signature covers neither `event-data` nor its id: one captured from a real request verifies
over any other event. So each token is good for one request (Mailgun's advice: refuse a token
seen before): `tokens` keeps it with the body's digest (database/webhooktokens.py) for the
tolerance, the same body again goes on (a retry: its event id is applied once), another body
is refused. The event id is `event-data.id`; the tag comes back in `event-data.user-variables`
(the send's `X-Mailgun-Variables: {"newsletter_tag": ...}`), our Message-ID in the message
headers.

    failed (permanent)   hard, or by its enhanced-code    complained   complaint
    failed (temporary)   delayed: Mailgun retries it (`retry-seconds`), a delivery may follow

A permanent failure is classified as `newsletter bounces` classifies a DSN (bounces/kinds.py): by
its code when it has one (5.7.1, a blocklist refusing the sender, is soft), by the label only
when it has none.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping

from newsletter.bounces.kinds import Kind, failure_kind, status_of
from newsletter.webhooks.common import (
    TAG_KEY,
    Event,
    RefusedError,
    check_time,
    parse_json,
    text_of,
)

NAME = "mailgun"
# (token, SHA-256 of the body, signed timestamp) -> whether the token is new or came with this
# same body before: kept where every process of the site sees it.
Tokens = Callable[[str, str, float], bool]


class Mailgun:
    def __init__(self, key: str, tolerance: int, tokens: Tokens) -> None:
        self.key = key.encode()
        self.tolerance = tolerance
        self.tokens = tokens

    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]:
        """The event of one verified request; RefusedError otherwise."""
        data = parse_json(body)  # the signature is inside the JSON: nothing else read first
        signature = data.get("signature") if isinstance(data, dict) else None
        if not isinstance(signature, dict):
            raise RefusedError("the body has no signature object")
        stamp, token = text_of(signature.get("timestamp"), 20), text_of(signature.get("token"))
        given = text_of(signature.get("signature"), 64)
        expected = hmac.new(self.key, (stamp + token).encode(), hashlib.sha256).hexdigest()
        if not token or not hmac.compare_digest(given.encode(), expected.encode()):
            raise RefusedError("the signature does not verify with the configured key")
        check_time(stamp, now, self.tolerance)
        if not self.tokens(token, hashlib.sha256(body).hexdigest(), float(stamp)):
            raise RefusedError("the signature's token came with another request before (a replay?)")
        assert isinstance(data, dict)
        event = _event(data.get("event-data"))
        return [event] if event else []


def _event(item: object) -> Event | None:
    if not isinstance(item, dict):
        return None
    name, severity = item.get("event"), item.get("severity")
    reported = item.get("delivery-status")
    status = reported if isinstance(reported, dict) else {}
    detail = text_of(status.get("message") or status.get("description"))
    code = status_of(text_of(status.get("enhanced-code"), 20), detail)
    if name == "failed" and severity == "temporary":
        kind = Kind.DELAYED  # Mailgun tries again: a delay, never a bounce (as anymail maps it)
    elif name == "failed":
        kind = failure_kind(code, Kind.HARD if severity == "permanent" else Kind.SOFT)
    elif name == "complained":
        kind = Kind.COMPLAINT
    else:
        return None
    ident = text_of(item.get("id"), 200)
    if not ident:
        return None
    variables = item.get("user-variables")
    message = item.get("message")
    found = message.get("headers") if isinstance(message, dict) else None
    message_id = text_of(found.get("message-id"), 400) if isinstance(found, dict) else ""
    return Event(
        NAME,
        ident,
        kind,
        text_of(item.get("recipient"), 320).lower(),
        tag=text_of(variables.get(TAG_KEY), 40) if isinstance(variables, dict) else "",
        message_id=f"<{message_id.strip('<>')}>" if message_id else "",
        status=code,
        detail=detail,
    )
