"""Amazon SES events through SNS: the SNS message is signed with RSA (SignatureVersion 1:
SHA1, 2: SHA256) by the certificate at SigningCertURL, which must be AWS's own shape, https on
an SNS host with the path SNS names its certificates by
(`https://sns.REGION.amazonaws.com/SimpleNotificationService-HEX.pem`; the host rule is AWS's
validators'), else nothing is fetched.

Checks in order, before the SES event inside is read: the header's message type matches the
body's, the TopicArn is one [webhooks] ses_topics names (a stranger's topic costs no fetch), the
certificate URL's shape, the signature over the documented fields, the timestamp's tolerance.
A SubscriptionConfirmation that passes is confirmed by GETting its SubscribeURL (same host
rule); nothing else confirms a subscription, and a confirmation that cannot be fetched is
answered 503 (SNS sends it again) with the reason in the log. The network goes through `fetch`
(a URL -> bytes), so tests hand in their own certificate.

Anyone can post a message naming a certificate URL, so fetches are bounded (Certificates): one
at a time per URL (posts naming a URL being fetched wait for that fetch's result), a few URLs at
once (a post naming yet another one is answered 503), a failure remembered for a short while
(a burst naming a failing URL costs one fetch), a certificate kept once had. A name SNS answers
4xx for is no certificate of SNS's (401); one that cannot be had now is a 503, which SNS retries
(it drops a post answered 4xx).

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
import http.client
import logging
import re
import threading
import time
import urllib.error
import urllib.request
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
# How SNS names its signing certificates (SimpleNotificationService-<32 hex digits>.pem in every
# region): any other name on an SNS host is no certificate of SNS's, so it is never fetched.
CERTIFICATE_PATH = re.compile(r"/SimpleNotificationService-[0-9a-fA-F]{1,64}\.pem")
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
MAX_FETCHES = 3  # certificate fetches under way at once, whatever URLs the posts name
_MAX_FAILURES = 256  # failed URLs remembered (the expired ones go first)
# SNS retries a post answered 5xx (never a 4xx) 20 s later by default: each retry fetches anew.
FAILURE_SECONDS = 15.0
# A network failure as urllib raises it: OSError (URLError, HTTPError, timeouts) or a malformed
# answer (http.client.HTTPException is not an OSError).
FETCH_ERRORS = (OSError, ValueError, http.client.HTTPException)
Fetch = Callable[[str], bytes]
log = logging.getLogger("newsletter.webhooks")


def sns_url(url: str) -> bool:
    """An https URL on an SNS host (no user, no port)."""
    parts = urlsplit(url)
    return (
        parts.scheme == "https"
        and SNS_HOST.fullmatch(parts.hostname or "") is not None
        and parts.netloc == parts.hostname
    )


def certificate_url(url: str) -> bool:
    """An SNS signing certificate's URL as SNS names them: an SNS host (sns_url), the path
    /SimpleNotificationService-HEX.pem, no query, no fragment."""
    parts = urlsplit(url)
    return (
        sns_url(url)
        and CERTIFICATE_PATH.fullmatch(parts.path) is not None
        and not parts.query
        and not parts.fragment
        and not url.endswith(("?", "#"))
    )


class Certificates:
    """SNS certificates' keys by URL, fetched through `fetch` at most once at a time per URL
    and `slots` URLs at once; a failure is remembered `failure_seconds` (on `clock`), a key
    until _MAX_CERTIFICATES are kept. Called from worker threads."""

    def __init__(
        self,
        fetch: Fetch,
        slots: int = MAX_FETCHES,
        failure_seconds: float = FAILURE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetch = fetch
        self.slots = slots
        self.failure_seconds = failure_seconds
        self.clock = clock
        self.lock = threading.Lock()
        self.keys: dict[str, rsa.RSAPublicKey] = {}
        self.failures: dict[str, tuple[float, RefusedError]] = {}  # URL -> (until, why)
        self.pending: dict[str, threading.Event] = {}  # URL -> set when its fetch is done

    def key(self, url: str) -> rsa.RSAPublicKey:
        """The key of the certificate at `url` (a certificate_url), or RefusedError: 401 when
        SNS has no such certificate, 503 when it cannot be had now or every fetch slot is taken
        by other URLs (SNS retries a 5xx)."""
        while True:
            with self.lock:
                if url in self.keys:
                    return self.keys[url]
                failed = self.failures.get(url)
                if failed is not None and failed[0] > self.clock():
                    within = f"{self.failure_seconds:.0f}"
                    why = f"{failed[1].message} (failed within {within} s, not asked again)"
                    raise RefusedError(why, failed[1].status)
                done = self.pending.get(url)
                if done is None:
                    if len(self.pending) >= self.slots:
                        raise RefusedError(
                            f"SNS certificate {url[:200]!r} not fetched: {self.slots} fetches"
                            " are under way already (SNS retries later)",
                            status=503,
                        )
                    done = self.pending[url] = threading.Event()
                    break  # this thread fetches
            log.debug("SNS certificate %r: waiting for the fetch under way", url[:200])
            done.wait()  # the fetch is bounded by `fetch`'s own timeout
        try:
            key = self._load(url)
        except RefusedError as exc:
            with self.lock:
                self._remember_failure(url, exc)
            raise
        else:
            with self.lock:
                if len(self.keys) >= _MAX_CERTIFICATES:
                    self.keys.clear()
                self.keys[url] = key
                self.failures.pop(url, None)
            return key
        finally:
            with self.lock:
                del self.pending[url]
            done.set()

    def _load(self, url: str) -> rsa.RSAPublicKey:
        try:
            data = self.fetch(url)
        except FETCH_ERRORS as exc:
            # SNS answering 4xx has no such certificate (a made-up name); anything else is the
            # network's fault or SNS's, so 503: SNS retries a 5xx and drops a post answered 4xx.
            code = exc.code if isinstance(exc, urllib.error.HTTPError) else 0
            status = 401 if 400 <= code < 500 else 503
            why = f"the SNS certificate {url[:200]!r} cannot be had: {exc}"
            raise RefusedError(why, status) from None
        try:
            key = x509.load_pem_x509_certificate(data).public_key()
        except ValueError:
            raise RefusedError(f"{url[:200]!r} is not a PEM certificate") from None
        if not isinstance(key, rsa.RSAPublicKey):
            raise RefusedError("the SNS certificate's key is not RSA")
        return key

    def _remember_failure(self, url: str, why: RefusedError) -> None:
        now = self.clock()
        if len(self.failures) >= _MAX_FAILURES:
            self.failures = {u: f for u, f in self.failures.items() if f[0] > now}
            if len(self.failures) >= _MAX_FAILURES:
                self.failures.clear()
        self.failures[url] = (now + self.failure_seconds, why)


class Ses:
    def __init__(self, topics: tuple[str, ...], tolerance: int, fetch: Fetch) -> None:
        self.topics = frozenset(topics)
        self.tolerance = tolerance
        self.fetch = fetch
        self.certificates = Certificates(fetch)

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
            try:
                self.fetch(url)
            except FETCH_ERRORS as exc:
                raise RefusedError(
                    f"topic {topic}: the SubscribeURL cannot be had ({exc}); the subscription"
                    " stays pending until SNS sends the confirmation again (or confirm it in"
                    " the SNS console)",
                    status=503,
                ) from None
            log.info("webhook ses: subscription to topic %s confirmed", topic)
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
        if not certificate_url(url):
            raise RefusedError(
                f"SigningCertURL {url[:200]!r} is not an SNS certificate"
                " (https://sns.REGION.amazonaws.com/SimpleNotificationService-HEX.pem)"
            )
        signed = "".join(
            f"{field}\n{data[field]}\n"
            for field in _SIGNED[kind]
            if isinstance(data.get(field), str)
        ).encode()
        signature = b64_bytes(text_of(data.get("Signature"), 2000), "the signature")
        try:
            key = self.certificates.key(url)
            key.verify(signature, signed, padding.PKCS1v15(), _HASHES[version]())
        except InvalidSignature:
            raise RefusedError("the signature does not verify with the SNS certificate") from None

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
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (https SNS host only)
        data: bytes = answer.read(65536)
    return data
