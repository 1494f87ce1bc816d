"""Rate limits: a client's address in, allowed or not (and when to try again) out.

Two token buckets stand in front of every signup: one per client and one for the whole site
(what a botnet of many addresses meets). They are asked at two different steps: the client's
first, before the request's body is read (`allow_client`); the site's only once the request's
proof of work has held (`allow_site`). Were the site's taken with the client's, junk posts from
a few addresses, each within its own limit, would drain it and turn away every visitor with a
solved challenge (65 posts from 13 addresses did; two dozen IPv6 /64s kept it so for ever).
A refusal takes nothing: a client refused by its own bucket takes none of the site's, and one
the site refuses gets its own token back. IPv6 clients are counted per /64, the block one
subscriber line gets (a /128 per address would give one machine 2^64 buckets).

The buckets live in this process (`newsletter serve` is one process: the event loop and its
worker threads share them under one lock) in bounded memory: at most `max_clients` are kept;
past that the least recently used go (they have had the longest to refill, and whoever is
forgotten early only gets a client's burst back: the site's bucket still holds).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]
MAX_CLIENTS = 50_000


@dataclass
class Bucket:
    """`burst` tokens at most, refilled at `rate` per second; `tokens` as of `stamp`."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def level(self, now: float) -> float:
        return min(self.burst, self.tokens + max(0.0, now - self.stamp) * self.rate)

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0 when one is)."""
        return max(0.0, (1.0 - self.level(now)) / self.rate)

    def take(self, now: float) -> None:
        self.tokens, self.stamp = self.level(now) - 1.0, now


@dataclass(frozen=True)
class Allowance:
    allowed: bool
    retry_after: float = 0.0  # seconds, when refused
    scope: str = ""  # "client" or "site": whose bucket was empty


def client_key(address: str) -> str:
    """The bucket a client address counts against: the address, or its /64 for IPv6
    (an IPv4-mapped IPv6 address counts as the IPv4 one); an unparseable one as itself."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class RequestLimiter:
    """Per-client and site-wide buckets; rates are per minute, bursts in requests."""

    def __init__(
        self,
        *,
        per_client_per_minute: float,
        per_client_burst: int,
        site_per_minute: float,
        site_burst: int,
        max_clients: int = MAX_CLIENTS,
        clock: Clock = time.monotonic,
    ) -> None:
        self._client_rate = per_client_per_minute / 60.0
        self._client_burst = float(per_client_burst)
        self._clock = clock
        now = clock()
        self._site = Bucket(site_per_minute / 60.0, float(site_burst), float(site_burst), now)
        self._clients: OrderedDict[str, Bucket] = OrderedDict()
        self._max = max_clients
        self._lock = threading.Lock()

    def allow_client(self, address: str) -> Allowance:
        """Take a token from the bucket of `address`, or say how long to wait."""
        key = client_key(address)
        with self._lock:
            now = self._clock()
            bucket = self._clients.get(key)
            if bucket is None:
                bucket = Bucket(self._client_rate, self._client_burst, self._client_burst, now)
            self._keep(key, bucket, now)
            client_wait = bucket.wait(now)
            if client_wait > 0:
                return Allowance(False, client_wait, "client")
            bucket.take(now)
            return Allowance(True)

    def allow_site(self, address: str) -> Allowance:
        """Take a token from the site's bucket for a request `allow_client` let through, or
        say how long to wait (and give the client its token back)."""
        with self._lock:
            now = self._clock()
            site_wait = self._site.wait(now)
            if site_wait <= 0:
                self._site.take(now)
                return Allowance(True)
            bucket = self._clients.get(client_key(address))
            if bucket is not None:
                bucket.tokens, bucket.stamp = min(bucket.burst, bucket.level(now) + 1.0), now
            return Allowance(False, site_wait, "site")

    def __len__(self) -> int:
        return len(self._clients)

    def _keep(self, key: str, bucket: Bucket, now: float) -> None:
        clients = self._clients
        clients[key] = bucket
        clients.move_to_end(key)
        if len(clients) > self._max:
            # Full: the least recently used tenth goes at once (no scan under the lock). They
            # had the longest to refill, and a client forgotten early only gets its burst back.
            for _ in range(len(clients) - self._max + self._max // 10):
                clients.popitem(last=False)
