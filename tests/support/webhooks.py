"""Providers' webhook requests signed as the providers sign them, for the site's tests."""

from __future__ import annotations

import base64
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec


def sendgrid_signed(
    key: ec.EllipticCurvePrivateKey, body: bytes, stamp: int | None = None
) -> dict[str, str]:
    """SendGrid's signed-webhook headers for `body`: ECDSA P-256 over timestamp + body."""
    ts = str(int(time.time()) if stamp is None else stamp)
    signature = key.sign(ts.encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": ts,
        "content-type": "application/json",
    }
