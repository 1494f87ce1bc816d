"""One request for a tracked link in; the event kept for it out, bounded and minimal.

An event holds what the people-or-machines rules (clicks/rules.py) read and no more: when (the
server's clock), the link's place, the method, whether the request said it is a prefetch, the
user agent's class (not the user agent: a browser's full string narrows a person down), the
address as `[privacy] ip` says, and in `per-reader` mode only the outbox row and the seconds
since that row's delivery. Every input comes from a stranger, so each is cut to a bound before
it is looked at.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import hmac
import ipaddress
import re
import threading
from collections.abc import Mapping
from typing import Literal, NamedTuple

from crawlerdetect import CrawlerDetect

from newsletter.formats.safetext import printable
from newsletter.mail.clicktokens import ClickTarget
from newsletter.rendering.places import Place

IpMode = Literal["truncate", "hash", "none"]
MACHINE = "machine:"  # the class of a user agent on crawlerdetect's list, then its name
BROWSER = "browser:"
_MAX_AGENT = 512
_MAX_NAME = 40
_MAX_HEADER = 200
_METHOD = re.compile(r"[A-Z]{1,10}")
# Headers a browser sends on a speculative load: Chrome's Sec-Purpose (and the older Purpose),
# Firefox's X-Moz, Safari's X-Purpose; no person asked for the page.
_PREFETCH_HEADERS = ("sec-purpose", "purpose", "x-moz", "x-purpose")
_PREFETCH_WORDS = frozenset({"prefetch", "prerender", "preview"})
_WORDS = re.compile(r"[\s;,]+")
# The engine a browser's user agent names, most specific first (Edge and Opera say Chrome too).
_FAMILIES = (
    ("Edg", "edge"),
    ("OPR/", "opera"),
    ("Firefox/", "firefox"),
    ("FxiOS/", "firefox"),
    ("CriOS/", "chrome"),
    ("Chrome/", "chrome"),
    ("Safari/", "safari"),
)


class ClickEvent(NamedTuple):
    at: float  # seconds since the epoch, the server's clock
    place: Place
    method: str  # GET, HEAD, ... or OTHER
    prefetch: bool
    agent: str  # agent_class() of the user agent
    ip: str  # as [privacy] ip keeps it: "203.0.113.0/24", "h:…" or ""
    since_delivery: float | None = None  # per-reader: seconds since that row's 250
    row: int | None = None  # per-reader: the outbox row


def click_event(
    *,
    at: float,
    target: ClickTarget,
    method: str,
    headers: Mapping[str, str],
    client: str,
    ip_mode: IpMode,
    ip_key: bytes = b"",
    delivered_at: float | None = None,
) -> ClickEvent:
    """The event for one request of a verified token's link. `delivered_at` is the time of that
    row's 250 (per-reader mode; None when unknown)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    since = None if delivered_at is None or target.row is None else at - delivered_at
    day = dt.datetime.fromtimestamp(at, dt.UTC).date()
    verb = method.upper()[:11]
    return ClickEvent(
        at=at,
        place=target.place,
        method=verb if _METHOD.fullmatch(verb) else "OTHER",
        prefetch=is_prefetch(lowered),
        agent=agent_class(lowered.get("user-agent", "")),
        ip=stored_ip(client, ip_mode, key=ip_key, day=day),
        since_delivery=since,
        row=target.row,
    )


def is_prefetch(headers: Mapping[str, str]) -> bool:
    """Whether the request says it is a prefetch or preview (header names in lower case)."""
    for name in _PREFETCH_HEADERS:
        value = headers.get(name)
        if value and _PREFETCH_WORDS.intersection(_WORDS.split(value[:_MAX_HEADER].lower())):
            return True
    return False


def agent_class(user_agent: str) -> str:
    """ "" for no user agent; ``machine:NAME`` for one on crawlerdetect's list of crawlers,
    scanners and HTTP libraries (NAME is what it matched); ``browser:FAMILY`` for a browser's;
    ``other`` for the rest."""
    return _agent_class(user_agent.strip()[:_MAX_AGENT])


_detector_lock = threading.Lock()


@functools.lru_cache(maxsize=4096)  # a send's readers use a few hundred distinct agents
def _agent_class(user_agent: str) -> str:
    if not user_agent:
        return ""
    with _detector_lock:  # a CrawlerDetect keeps its last match on itself
        found = _detector().isCrawler(user_agent)
        matched = _detector().getMatches() if found else None
    if found:
        name = printable(str(matched or "unnamed")).strip().lower()[:_MAX_NAME]
        return MACHINE + (name or "unnamed")
    for marker, family in _FAMILIES:
        if marker in user_agent:
            return BROWSER + family
    return "other"


@functools.cache
def _detector() -> CrawlerDetect:
    return CrawlerDetect()


def stored_ip(address: str, mode: IpMode, *, key: bytes = b"", day: dt.date | None = None) -> str:
    """The client address as `[privacy] ip` keeps it: its network (IPv4 /24, IPv6 /48) for
    "truncate"; for "hash", a digest under `key` and the `day` (UTC), which links one address's
    requests within a day and no further; "" for "none" or an address that does not parse."""
    if mode == "none":
        return ""
    try:
        ip = ipaddress.ip_address(address.strip()[:64])
    except ValueError:
        return ""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if mode == "hash":
        if not key:
            raise ValueError("hashing an address needs a key")
        when = (day or dt.datetime.now(dt.UTC).date()).isoformat().encode("ascii")
        mac = hmac.digest(key, b"newsletter client address\n" + when + b"\n" + ip.packed, "sha256")
        return "h:" + base64.urlsafe_b64encode(mac[:9]).decode("ascii")
    prefix = 24 if ip.version == 4 else 48
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def ip_key(secret: bytes) -> bytes:
    """The key `stored_ip` hashes with, derived from NEWSLETTER_SECRET (never the secret)."""
    return hmac.digest(secret, b"newsletter client address key", hashlib.sha256)
