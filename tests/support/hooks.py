"""Providers' webhook requests signed as each provider documents it, for tests that feed a
reader (webhooks/) or the running site: Mailgun's HMAC of timestamp + token in the body,
SendGrid's ECDSA P-256 over timestamp + body, Resend's (Svix) HMAC of id, timestamp and body,
and an SNS message signed by a certificate the test made (its `fetch` stands in for the network
and serves it)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from newsletter.database import Database
from newsletter.webhooks.mailgun import NAME, Mailgun

MAILGUN_KEY = "key-mailgun-test-signing-0123456789"


def mailgun(
    event_data: dict[str, Any],
    *,
    token: str | None = None,
    stamp: int | None = None,
    key: str = MAILGUN_KEY,
) -> bytes:
    """A Mailgun webhook body: `event_data` and the signature object over timestamp + token
    (a fresh token unless one is given: Mailgun makes one per request)."""
    ts = str(int(time.time()) if stamp is None else stamp)
    token = secrets.token_hex(25) if token is None else token
    mac = hmac.new(key.encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    signature = {"timestamp": ts, "token": token, "signature": mac}
    return json.dumps({"signature": signature, "event-data": event_data}).encode()


def mailgun_reader(database: Database, tolerance: int = 300) -> Mailgun:
    """Mailgun's reader as the site wires it: its tokens kept in `database`."""

    def first_use(token: str, digest: str, stamp: float) -> bool:
        expired = time.time() - tolerance
        return database.webhook_tokens.first_use(NAME, token, digest, stamp, expired)

    return Mailgun(MAILGUN_KEY, tolerance, first_use)


class SendGridKey:
    """An Event Webhook verification key pair: `public` is what the settings hold."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.public = base64.b64encode(der).decode()

    def headers(self, body: bytes, stamp: int | None = None) -> dict[str, str]:
        ts = str(int(time.time()) if stamp is None else stamp)
        signature = self.key.sign(ts.encode() + body, ec.ECDSA(hashes.SHA256()))
        return {
            "x-twilio-email-event-webhook-signature": base64.b64encode(signature).decode(),
            "x-twilio-email-event-webhook-timestamp": ts,
            "content-type": "application/json",
        }


RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-signing-secret-32by").decode()


def svix_headers(body: bytes, ident: str, stamp: int | None = None) -> dict[str, str]:
    """Resend's (Svix's) headers for `body` as event `ident`: HMAC-SHA256 of id.timestamp.body
    keyed with RESEND_SECRET's base64 after whsec_."""
    ts = str(int(time.time()) if stamp is None else stamp)
    key = base64.b64decode(RESEND_SECRET.removeprefix("whsec_"))
    mac = hmac.digest(key, f"{ident}.{ts}.".encode() + body, hashlib.sha256)
    return {
        "svix-id": ident,
        "svix-timestamp": ts,
        "svix-signature": "v1," + base64.b64encode(mac).decode(),
        "content-type": "application/json",
    }


SNS_TOPIC = "arn:aws:sns:us-east-1:123456789012:newsletter-bounces"
SNS_CERT_URL = (
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-"
    "9c6465fa7f48f5cacd23014631ec1136.pem"
)
_NOTIFICATION = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")


class Sns:
    """SNS as the site sees it: Notifications signed (SignatureVersion 2) by a certificate
    served at SNS_CERT_URL through `fetch`."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
            .not_valid_after(dt.datetime(2040, 1, 1, tzinfo=dt.UTC))
            .sign(self.key, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM)
        )

    def fetch(self, url: str) -> bytes:
        if url == SNS_CERT_URL:
            return self.certificate
        raise OSError(f"no network in tests ({url})")

    def notification(self, message: dict[str, Any], message_id: str) -> bytes:
        """A signed Notification carrying the SES event `message` as its Message."""
        moment = dt.datetime.now(dt.UTC)
        data = {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": SNS_TOPIC,
            "Message": json.dumps(message),
            "Timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "SignatureVersion": "2",
            "SigningCertURL": SNS_CERT_URL,
        }
        text = "".join(f"{k}\n{data[k]}\n" for k in _NOTIFICATION if k in data).encode()
        signature = self.key.sign(text, padding.PKCS1v15(), hashes.SHA256())
        data["Signature"] = base64.b64encode(signature).decode()
        return json.dumps(data).encode()

    @staticmethod
    def headers() -> dict[str, str]:
        return {"x-amz-sns-message-type": "Notification", "content-type": "text/plain"}
