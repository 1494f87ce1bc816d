"""Pacing without a server: the token bucket and the retry backoff."""

from __future__ import annotations

from newsletter.send.pacing import RateLimiter, backoff


async def test_unlimited_rate_is_not_paced() -> None:
    limiter = RateLimiter(0)
    for _ in range(1000):
        await limiter.take()
    assert limiter.interval == 0


def test_a_slot_taken_now_says_how_long_until_it_comes() -> None:
    limiter = RateLimiter(10)  # a slot every 0.1 s
    assert limiter.ready()
    assert limiter.take_now() == 0
    assert not limiter.ready()
    assert 0.09 < limiter.take_now() <= 0.1  # the next slot is 0.1 s on
    assert RateLimiter(0).ready()


def test_full_jitter_backoff_stays_within_its_cap() -> None:
    values = [backoff(n, 1.0, 60.0) for n in range(1, 12) for _ in range(50)]
    assert all(0 <= v <= 60 for v in values)
    assert max(backoff(1, 1.0, 60.0) for _ in range(200)) <= 1.0
    assert max(backoff(10, 1.0, 60.0) for _ in range(200)) > 30
