"""Amazon SES events through SNS: the SNS message is signed with RSA (SignatureVersion 1:
SHA1, 2: SHA256) by the certificate at SigningCertURL, which must be https on an SNS host
(`sns.REGION.amazonaws.com`, as AWS's own validators require), else nothing is fetched.

Checks in order, before the SES event inside is read: the header's message type matches the
body's, the TopicArn is one [webhooks] ses_topics names (a stranger's topic costs no fetch), the
certificate URL's shape, the signature over the documented fields, the timestamp's tolerance.
A SubscriptionConfirmation that passes is confirmed by GETting its SubscribeURL (same host
rule); nothing else confirms a subscription. The network goes through `fetch` (a URL -> bytes),
so tests hand in their own certificate; certificates are cached by URL.

The tag comes back in `mail.tags` (the send's `X-SES-MESSAGE-TAGS: newsletter_tag=TAG`, with a
configuration set that publishes events) or in `mail.headers` (X-Newsletter-Tag). The event id
is the SNS MessageId.

    Bounce (Permanent)   hard    Bounce (Transient, Undetermined)   soft
    DeliveryDelay        delayed Complaint                          complaint

A bounce is classified by its recipient's status (or the code in its diagnosticCode) when it has
an RFC 3463 one, as `newsletter bounces` classifies a DSN (bounces/kinds.py); by its bounceType
only when it has none. A complaint whose complaintFeedbackType is not a complaint's (not-spam,
auth-failure: kinds.is_complaint, the rule of a mailed ARF report) is no event of ours.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from newsletter.bounces.kinds import Kind, failure_kind, is_complaint, status_of
from newsletter.bounces.verp import TAG_HEADER
from newsletter.webhooks.common import (
    TAG_KEY,
    Event,
    RefusedError,
    b64_bytes,
    parse_json,
    text_of,
)

NAME = "ses"
SNS_HOST = re.compile(r"sns\.[a-zA-Z0-9\-]{3,}\.amazonaws\.com(\.cn)?")
_SIGNED = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        *("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"),
    ),
    "UnsubscribeConfirmation": (
        *("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"),
    ),
}
_HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
_MAX_CERTIFICATES = 16  # SNS rotates its certificate now and then; a few URLs at most
Fetch = Callable[[str], bytes]


def sns_url(url: str, suffix: str = "") -> bool:
    """An https URL on an SNS host (no user, no port), ending in `suffix` if given."""
    parts = urlsplit(url)
    return (
        parts.scheme == "https"
        and SNS_HOST.fullmatch(parts.hostname or "") is not None
        and parts.netloc == parts.hostname
        and parts.path.endswith(suffix)
    )


class Ses:
    def __init__(self, topics: tuple[str, ...], tolerance: int, fetch: Fetch) -> None:
        self.topics = frozenset(topics)
        self.tolerance = tolerance
        self.fetch = fetch
        self.certificates: dict[str, rsa.RSAPublicKey] = {}

    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]:
        """The event of one verified SNS message (a confirmation is confirmed and has none)."""
        data = parse_json(body)  # the signature is inside the JSON: nothing else read first
        if not isinstance(data, dict):
            raise RefusedError("the body is not an SNS message", status=400)
        kind = text_of(data.get("Type"), 40)
        if kind not in _SIGNED or headers.get("x-amz-sns-message-type") != kind:
            raise RefusedError(f"SNS message type {kind!r} is not the header's", status=400)
        topic = text_of(data.get("TopicArn"), 300)
        if topic not in self.topics:
            raise RefusedError(f"topic {topic!r} is not in [webhooks] ses_topics")
        self._verify(data, kind)
        self._check_time(text_of(data.get("Timestamp"), 40), now)
        if kind == "SubscriptionConfirmation":
            url = text_of(data.get("SubscribeURL"), 2000)
            if not sns_url(url):
                raise RefusedError("the SubscribeURL is not on an SNS host")
            self.fetch(url)
            return []
        if kind != "Notification":
            return []
        message = parse_json(text_of(data.get("Message"), 1 << 20).encode())
        event = _event(text_of(data.get("MessageId"), 200), message)
        return [event] if event else []

    def _verify(self, data: dict[str, object], kind: str) -> None:
        version = text_of(data.get("SignatureVersion"), 4)
        if version not in _HASHES:
            raise RefusedError(f"SignatureVersion {version!r} is not 1 or 2")
        url = text_of(data.get("SigningCertURL"), 2000)
        if not sns_url(url, ".pem"):
            raise RefusedError(f"SigningCertURL {url[:200]!r} is not an SNS certificate")
        signed = "".join(
            f"{field}\n{data[field]}\n"
            for field in _SIGNED[kind]
            if isinstance(data.get(field), str)
        ).encode()
        signature = b64_bytes(text_of(data.get("Signature"), 2000), "the signature")
        try:
            self._key(url).verify(signature, signed, padding.PKCS1v15(), _HASHES[version]())
        except InvalidSignature:
            raise RefusedError("the signature does not verify with the SNS certificate") from None

    def _key(self, url: str) -> rsa.RSAPublicKey:
        if url not in self.certificates:
            try:
                key = x509.load_pem_x509_certificate(self.fetch(url)).public_key()
            except (OSError, ValueError) as exc:
                raise RefusedError(f"the SNS certificate cannot be had: {exc}") from None
            if not isinstance(key, rsa.RSAPublicKey):
                raise RefusedError("the SNS certificate's key is not RSA")
            if len(self.certificates) >= _MAX_CERTIFICATES:
                self.certificates.clear()
            self.certificates[url] = key
        return self.certificates[url]

    def _check_time(self, stamp: str, now: float) -> None:
        try:
            moment = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise RefusedError(f"timestamp {stamp!r} is not ISO 8601") from None
        if abs(now - moment) > self.tolerance:
            raise RefusedError(f"timestamp {stamp} is {int(now - moment)} s from ours (a replay?)")


def _event(ident: str, message: object) -> Event | None:
    if not isinstance(message, dict) or not ident:
        return None
    name = message.get("eventType") or message.get("notificationType")
    if name == "Bounce":
        detail = message.get("bounce")
        kinds = {"Permanent": Kind.HARD}
        key, people = "bounceType", "bouncedRecipients"
    elif name == "Complaint":
        detail = message.get("complaint")
        kinds, key, people = {}, "", "complainedRecipients"
    elif name == "DeliveryDelay":
        detail = message.get("deliveryDelay")
        kinds, key, people = {}, "", "delayedRecipients"
    else:
        return None
    if not isinstance(detail, dict):
        return None
    if name == "Complaint" and not is_complaint(text_of(detail.get("complaintFeedbackType"))):
        return None  # marked as not spam, or a report on authentication: nobody complained
    default = {"Bounce": Kind.SOFT, "Complaint": Kind.COMPLAINT}.get(name, Kind.DELAYED)
    kind = kinds.get(text_of(detail.get(key)), default) if key else default
    found = detail.get(people)
    first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    diagnostic = text_of(first.get("diagnosticCode"))
    status = status_of(text_of(first.get("status"), 20), diagnostic)
    if name == "Bounce":
        kind = failure_kind(status, kind)
    mail = message.get("mail")
    return Event(
        NAME,
        ident,
        kind,
        text_of(first.get("emailAddress"), 320).lower(),
        tag=_tag(mail if isinstance(mail, dict) else {}),
        status=status,
        detail=diagnostic,
    )


def _tag(mail: dict[str, object]) -> str:
    tags = mail.get("tags")
    if isinstance(tags, dict) and isinstance(tags.get(TAG_KEY), list) and tags[TAG_KEY]:
        return text_of(tags[TAG_KEY][0], 40)
    headers = mail.get("headers")
    for header in headers if isinstance(headers, list) else []:
        if isinstance(header, dict) and str(header.get("name", "")).lower() == TAG_HEADER.lower():
            return text_of(header.get("value"), 40)
    return ""


def fetch_https(url: str) -> bytes:
    """GET `url` (callers pass only SNS URLs), 64 KiB at most, in 10 seconds."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (https SNS host only)
        data: bytes = answer.read(65536)
    return data
