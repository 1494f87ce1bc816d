"""SendGrid's Event Webhook: an ECDSA P-256 signature over the timestamp and the raw body.

Headers `X-Twilio-Email-Event-Webhook-Signature` (base64 DER) and `...-Timestamp`; the key is
the base64 SubjectPublicKeyInfo from the webhook's settings (NEWSLETTER_WEBHOOK_SENDGRID_KEY,
public, but kept with the secrets so one place configures each provider). The body is a JSON
array; custom arguments arrive as top-level keys, so the send's `X-SMTPAPI` unique_args (or v3
`custom_args`) `newsletter_tag` comes back as `newsletter_tag`.

    bounce (type bounce)       hard        bounce (type blocked)   soft
    deferred                   delayed     spamreport              complaint

A bounce is classified by its status (or the code in its `reason`) when it has an RFC 3463 one,
as `newsletter bounces` classifies a DSN (bounces/kinds.py); by its type only when it has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from newsletter.bounces.kinds import Kind, failure_kind, status_of
from newsletter.webhooks.common import (
    TAG_KEY,
    Event,
    RefusedError,
    b64_bytes,
    check_time,
    parse_json,
    text_of,
)

NAME = "sendgrid"
SIGNATURE = "x-twilio-email-event-webhook-signature"
TIMESTAMP = "x-twilio-email-event-webhook-timestamp"


class SendGrid:
    def __init__(self, public_key: str, tolerance: int) -> None:
        try:
            key = serialization.load_der_public_key(b64_bytes(public_key, "the key"))
        except (RefusedError, ValueError):
            key = None
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise ValueError("NEWSLETTER_WEBHOOK_SENDGRID_KEY is not a base64 EC public key")
        self.key = key
        self.tolerance = tolerance

    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]:
        """The events of one verified request; RefusedError otherwise."""
        stamp = headers.get(TIMESTAMP, "")
        signature = b64_bytes(headers.get(SIGNATURE, ""), "the signature")
        try:
            self.key.verify(signature, stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise RefusedError("the signature does not verify with the configured key") from None
        check_time(stamp, now, self.tolerance)
        data = parse_json(body)
        if not isinstance(data, list):
            raise RefusedError("the body is not a JSON array of events", status=400)
        return [e for item in data if isinstance(item, dict) and (e := _event(item))]


def _event(item: dict[str, object]) -> Event | None:
    name = item.get("event")
    reason = text_of(item.get("reason"))
    status = status_of(text_of(item.get("status"), 20), reason)
    if name == "bounce":
        kind = failure_kind(status, Kind.SOFT if item.get("type") == "blocked" else Kind.HARD)
    elif name == "deferred":
        kind = Kind.DELAYED
    elif name == "spamreport":
        kind = Kind.COMPLAINT
    else:
        return None  # deliveries, opens, clicks: not ours to count
    event_id = text_of(item.get("sg_event_id"), 200)
    if not event_id:
        return None
    return Event(
        NAME,
        event_id,
        kind,
        text_of(item.get("email"), 320).lower(),
        tag=text_of(item.get(TAG_KEY), 40),
        message_id=text_of(item.get("smtp-id"), 400),
        status=status,
        detail=reason,
    )
