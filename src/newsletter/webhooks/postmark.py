"""Postmark's bounce and spam-complaint webhooks: Postmark does not sign, so the webhook URL
carries HTTP basic-auth credentials (`https://postmark:PASSWORD@host/webhooks/postmark`), checked
in constant time before the body is read. User [webhooks] postmark_user, password
NEWSLETTER_WEBHOOK_POSTMARK_PASSWORD. There is no signed time: a replay is stopped by the event's
id alone (`RecordType:ID`, kept for common.SEEN_SECONDS). The tag comes back in `Metadata`
(the send's `X-PM-Metadata-newsletter_tag` header).

    Bounce (HardBounce)        hard        Bounce (SoftBounce)   soft
    Bounce (Transient)         delayed     SpamComplaint         complaint

A hard or soft bounce whose `Details` (the server's words) hold an RFC 3463 code is classified
by it, as `newsletter bounces` classifies a DSN (bounces/kinds.py); by its type only when not.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from newsletter.bounces.kinds import Kind, failure_kind, status_of
from newsletter.webhooks.common import TAG_KEY, Event, RefusedError, parse_json, text_of

NAME = "postmark"
_BOUNCES = {"HardBounce": Kind.HARD, "SoftBounce": Kind.SOFT, "Transient": Kind.DELAYED}


class Postmark:
    def __init__(self, user: str, password: str) -> None:
        self.expected = f"{user}:{password}".encode()

    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]:
        """The event of one request with the configured credentials; RefusedError otherwise."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        try:
            given = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            given = b""
        if scheme.lower() != "basic" or not hmac.compare_digest(given, self.expected):
            raise RefusedError("the basic-auth credentials are missing or wrong")
        data = parse_json(body)
        event = _event(data) if isinstance(data, dict) else None
        return [event] if event else []


def _event(item: dict[str, object]) -> Event | None:
    record = item.get("RecordType")
    status = status_of("", text_of(item.get("Details")))
    if record == "Bounce":
        label = _BOUNCES.get(text_of(item.get("Type")))
        kind = failure_kind(status, label) if label in (Kind.HARD, Kind.SOFT) else label
    elif record == "SpamComplaint":
        kind = Kind.COMPLAINT
    else:
        return None
    ident = text_of(item.get("ID"), 100)
    if kind is None or not ident:
        return None
    metadata = item.get("Metadata")
    tag = text_of(metadata.get(TAG_KEY), 40) if isinstance(metadata, dict) else ""
    return Event(
        NAME,
        f"{record}:{ident}",
        kind,
        text_of(item.get("Email") or item.get("Recipient"), 320).lower(),
        tag=tag,
        status=status,
        detail=text_of(item.get("Description")),
    )
