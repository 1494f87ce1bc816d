"""Resend's webhooks, signed by Svix: HMAC-SHA256 of `id.timestamp.body`.

Headers `svix-id`, `svix-timestamp` and `svix-signature` (space-separated `v1,<base64>`); the
key is the base64 after `whsec_` of the endpoint's signing secret
(NEWSLETTER_WEBHOOK_RESEND_SECRET). The svix-id is the event's id. The tag comes back in
`data.tags` (a tag named `newsletter_tag`) or in `data.headers` (`X-Newsletter-Tag`).

    email.bounced (Permanent)  hard        email.bounced (Transient)  soft
    email.delivery_delayed     delayed     email.complained           complaint

A bounce whose message holds an RFC 3463 code is classified by it, as `newsletter bounces`
classifies a DSN (bounces/kinds.py); by its type only when it has none.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from newsletter.bounces.kinds import Kind, failure_kind, status_of
from newsletter.bounces.verp import TAG_HEADER
from newsletter.webhooks.common import (
    TAG_KEY,
    Event,
    RefusedError,
    b64_bytes,
    check_time,
    parse_json,
    text_of,
)

NAME = "resend"
PREFIX = "whsec_"


class Resend:
    def __init__(self, secret: str, tolerance: int) -> None:
        if not secret.startswith(PREFIX):
            raise ValueError("NEWSLETTER_WEBHOOK_RESEND_SECRET must start with whsec_")
        try:
            self.key = base64.b64decode(secret[len(PREFIX) :], validate=True)
        except ValueError:
            raise ValueError("NEWSLETTER_WEBHOOK_RESEND_SECRET is not whsec_ + base64") from None
        self.tolerance = tolerance

    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]:
        """The event of one verified request; RefusedError otherwise."""
        ident, stamp = headers.get("svix-id", ""), headers.get("svix-timestamp", "")
        signed = f"{ident}.{stamp}.".encode() + body
        expected = hmac.digest(self.key, signed, hashlib.sha256)
        offered = [
            part[3:] for part in headers.get("svix-signature", "").split() if part[:3] == "v1,"
        ]
        if not ident or not any(
            hmac.compare_digest(expected, b64_bytes(sig, "a signature")) for sig in offered[:8]
        ):
            raise RefusedError("no svix-signature verifies with the configured secret")
        check_time(stamp, now, self.tolerance)
        data = parse_json(body)
        event = _event(ident[:200], data) if isinstance(data, dict) else None
        return [event] if event else []


def _event(ident: str, payload: dict[str, object]) -> Event | None:
    data = payload.get("data")
    if not isinstance(data, dict):
        return None
    name = payload.get("type")
    found = data.get("bounce")
    bounce = found if isinstance(found, dict) else {}
    detail = text_of(bounce.get("message"))
    status = status_of("", detail)
    if name == "email.bounced":
        kind = failure_kind(status, Kind.SOFT if bounce.get("type") == "Transient" else Kind.HARD)
    elif name == "email.delivery_delayed":
        kind = Kind.DELAYED
    elif name == "email.complained":
        kind = Kind.COMPLAINT
    else:
        return None
    to = data.get("to")
    recipient = to[0] if isinstance(to, list) and to else to
    return Event(
        NAME,
        ident,
        kind,
        text_of(recipient, 320).lower(),
        tag=_tag(data),
        status=status,
        detail=detail,
    )


def _tag(data: dict[str, object]) -> str:
    """The tag from `data.tags` (a list of {name, value}, or one object), else the header."""
    tags, headers = data.get("tags"), data.get("headers")
    if isinstance(tags, dict):
        return text_of(tags.get(TAG_KEY), 40)
    pairs = [
        *(tags if isinstance(tags, list) else []),
        *(headers if isinstance(headers, list) else []),
    ]
    for pair in pairs:
        if isinstance(pair, dict) and str(pair.get("name", "")).lower() in (
            TAG_KEY,
            TAG_HEADER.lower(),
        ):
            return text_of(pair.get("value"), 40)
    return ""
