"""The token buckets: a client's burst, then a wait; the site's bucket against many clients,
spent only when asked for (after the proof of work); IPv6 counted per /64; memory bounded
however many clients; exact under concurrency."""

from __future__ import annotations

import threading

import pytest

from newsletter.signup.limits import Allowance, RequestLimiter, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(clock: Clock, **overrides: float) -> RequestLimiter:
    options: dict[str, float] = {
        "per_client_per_minute": 6.0,
        "per_client_burst": 3,
        "site_per_minute": 60.0,
        "site_burst": 10,
        **overrides,
    }
    return RequestLimiter(clock=clock, **options)  # type: ignore[arg-type]


def allow(limits: RequestLimiter, address: str) -> Allowance:
    """Both steps, as a signup whose proof of work held meets them."""
    client = limits.allow_client(address)
    return limits.allow_site(address) if client.allowed else client


def test_a_client_gets_its_burst_then_waits_for_the_refill() -> None:
    clock = Clock()
    limits = limiter(clock)
    assert [allow(limits, "192.0.2.1").allowed for _ in range(4)] == [True, True, True, False]
    refused = allow(limits, "192.0.2.1")
    assert (refused.scope, round(refused.retry_after)) == ("client", 10)  # 6 a minute
    clock.now += 10
    assert allow(limits, "192.0.2.1").allowed
    assert not allow(limits, "192.0.2.1").allowed
    assert allow(limits, "192.0.2.2").allowed  # another client has its own bucket


def test_the_site_bucket_stops_many_clients_and_a_refused_client_takes_none_of_it() -> None:
    clock = Clock()
    limits = limiter(clock, per_client_burst=1)
    for _ in range(50):  # one client hammering: refused by its own bucket only
        allow(limits, "192.0.2.1")
    allowed = [allow(limits, f"198.51.100.{n}").allowed for n in range(20)]
    assert allowed == [True] * 9 + [False] * 11  # the site's 10, less the one 192.0.2.1 took
    refused = allow(limits, "203.0.113.1")
    assert (refused.scope, round(refused.retry_after)) == ("site", 1)
    clock.now += 1
    assert allow(limits, "203.0.113.1").allowed


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("not an address", "not an address"),
        ("x" * 500, "x" * 64),
    ],
)
def test_clients_are_keyed_by_address_and_ipv6_by_its_64(address: str, key: str) -> None:
    assert client_key(address) == key


def test_one_ipv6_64_is_one_client() -> None:
    limits = limiter(Clock(), per_client_burst=2)
    hosts = [f"2001:db8:1:2::{n:x}" for n in range(1, 5)]
    assert [allow(limits, h).allowed for h in hosts] == [True, True, False, False]


def test_memory_is_bounded_however_many_clients_come() -> None:
    clock = Clock()
    limits = limiter(clock, site_per_minute=1e9, site_burst=10**9, max_clients=1000)
    for n in range(20_000):
        allow(limits, f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}")
        assert len(limits) <= 1000
    # The most recent clients are still counted.
    last = "10.0.78.31"  # n = 19_999
    assert [allow(limits, last).allowed for _ in range(3)] == [True, True, False]


def test_concurrent_requests_take_exactly_the_burst() -> None:
    limits = limiter(Clock(), per_client_burst=100, site_burst=10_000)  # the clock stands still
    allowed: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def hammer() -> None:
        start.wait()
        mine = [allow(limits, "192.0.2.7").allowed for _ in range(500)]
        with lock:
            allowed.extend(mine)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert allowed.count(True) == 100


def test_only_what_asks_for_the_site_bucket_spends_it() -> None:
    # The site's bucket was taken with the client's, before the proof of work: junk posts from
    # a few addresses, each within its own limit, drained it for everyone.
    limits = limiter(Clock(), per_client_burst=5, site_burst=10, site_per_minute=0.001)
    for n in range(13):
        assert [limits.allow_client(f"192.0.2.{n}").allowed for _ in range(6)][-1] is False
    assert allow(limits, "198.51.100.1").allowed


def test_a_client_the_site_refuses_keeps_its_own_token() -> None:
    limits = limiter(Clock(), per_client_burst=1, site_burst=1, site_per_minute=0.001)
    assert allow(limits, "192.0.2.1").allowed
    refused = allow(limits, "192.0.2.2")
    assert refused.scope == "site"
    assert limits.allow_client("192.0.2.2").allowed  # its one token came back
