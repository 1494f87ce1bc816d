"""Returned mail as mail servers write it, for a message a test really sent.

`dsn(original, ...)` is a Postfix-style RFC 3464 report addressed to the message's envelope
sender (its Return-Path), quoting the original headers; `complaint(original, ...)` an RFC 5965
ARF report as a mailbox provider's feedback loop sends it; `vacation(original)` an RFC 3834
auto-reply. All three come back as bytes a mailbox stores. `signed(raw, key, domain)` adds the
DKIM signature a provider's mail system puts on them.
"""

from __future__ import annotations

import datetime as dt
import email
from email.message import Message
from email.utils import format_datetime, make_msgid

import dkim
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dkimkeys import pem

SELECTOR = "fbl"  # the selector every test provider publishes its key under

_NOW = dt.datetime(2026, 11, 30, 8, 30, tzinfo=dt.UTC)


def _original(raw: bytes) -> tuple[Message, str, str]:
    msg = email.message_from_bytes(raw)
    sender = str(msg.get("Return-Path", "")).strip("<> ")
    recipient = str(msg.get("Delivered-To", "") or msg.get("To", "")).strip()
    return msg, sender, recipient


def _headers(msg: Message) -> str:
    return "\r\n".join(f"{k}: {v}" for k, v in msg.items())


def dsn(
    raw: bytes,
    *,
    status: str = "5.1.1",
    action: str = "failed",
    diagnostic: str = "550 5.1.1 <{rcpt}>: Recipient address rejected: User unknown",
    to: str | None = None,
    sender_address: str = "MAILER-DAEMON@mx.example.net",
) -> bytes:
    """A delivery status notification for the message in `raw` (as the capture server stored
    it: with Return-Path and Delivered-To), from `sender_address`."""
    msg, sender, rcpt = _original(raw)
    said = diagnostic.format(rcpt=rcpt)
    lines = [
        f"From: {sender_address} (Mail Delivery System)",
        f"To: {to or sender}",
        "Subject: Undelivered Mail Returned to Sender",
        f"Date: {format_datetime(_NOW)}",
        f"Message-ID: {make_msgid(domain='mx.example.net')}",
        "Auto-Submitted: auto-replied",
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=delivery-status; boundary="dsn"',
        "",
        "--dsn",
        "Content-Type: text/plain",
        "",
        f"<{rcpt}>: host mx.example.net said: {said}",
        "",
        "--dsn",
        "Content-Type: message/delivery-status",
        "",
        "Reporting-MTA: dns; mx.example.net",
        "",
        f"Final-Recipient: rfc822; {rcpt}",
        f"Original-Recipient: rfc822;{rcpt}",
        f"Action: {action}",
        f"Status: {status}",
        f"Diagnostic-Code: smtp; {said}",
        "",
        "--dsn",
        "Content-Type: text/rfc822-headers",
        "",
        _headers(msg),
        "--dsn--",
        "",
    ]
    return "\r\n".join(lines).encode()


def complaint(
    raw: bytes,
    *,
    to: str = "bounces@news.example.org",
    sender_address: str = "feedback@fbl.example.net",
) -> bytes:
    """An ARF abuse report about the message in `raw`, recipient given in clear."""
    msg, sender, rcpt = _original(raw)
    lines = [
        f"From: {sender_address}",
        f"To: {to}",
        "Subject: Abuse report",
        f"Date: {format_datetime(_NOW)}",
        f"Message-ID: {make_msgid(domain='fbl.example.net')}",
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=feedback-report; boundary="arf"',
        "",
        "--arf",
        "Content-Type: text/plain",
        "",
        "This is an email abuse report.",
        "",
        "--arf",
        "Content-Type: message/feedback-report",
        "",
        "Feedback-Type: abuse",
        "User-Agent: Test-FBL/1.0",
        "Version: 1",
        f"Original-Mail-From: <{sender}>",
        f"Original-Rcpt-To: <{rcpt}>",
        "",
        "--arf",
        "Content-Type: text/rfc822-headers",
        "",
        _headers(msg),
        "--arf--",
        "",
    ]
    return "\r\n".join(lines).encode()


def vacation(raw: bytes) -> bytes:
    """An RFC 3834 vacation reply to the message in `raw`, sent to its return path."""
    msg, sender, rcpt = _original(raw)
    lines = [
        f"From: {rcpt}",
        f"To: {sender}",
        f"Subject: Auto: {msg.get('Subject', '')}",
        f"Date: {format_datetime(_NOW)}",
        f"Message-ID: {make_msgid(domain='example.org')}",
        f"In-Reply-To: {msg.get('Message-ID', '')}",
        "Auto-Submitted: auto-replied (vacation)",
        "",
        "I am away until Monday.",
        "",
    ]
    return "\r\n".join(lines).encode()


def signed(raw: bytes, key: rsa.RSAPrivateKey, domain: str, **options: object) -> bytes:
    """`raw` with a DKIM-Signature of `domain` (selector SELECTOR) on top, From signed."""
    headers = [b"From", b"To", b"Subject", b"Date", b"Message-ID"]
    signature = dkim.sign(
        raw,
        SELECTOR.encode(),
        domain.encode(),
        pem(key),
        include_headers=headers,
        **options,  # type: ignore[arg-type]
    )
    return bytes(signature) + raw
