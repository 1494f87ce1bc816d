"""Pacing without a server: the token bucket and the retry backoff."""

from __future__ import annotations

import asyncio
import itertools
import time

from newsletter.send.courier import RETRY
from newsletter.send.pacing import RateLimiter, RetryPolicy


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


async def test_waiters_through_a_stall_still_leave_one_interval_apart() -> None:
    """Slots are claimed when a message leaves, not reserved while it waits: four senders
    waiting through a stall of the event loop past all their slots leave spaced, not at once."""
    limiter = RateLimiter(20)  # a slot every 0.05 s
    left: list[float] = []

    async def sender() -> None:
        await limiter.take()
        left.append(time.monotonic())

    tasks = [asyncio.create_task(sender()) for _ in range(4)]
    await asyncio.sleep(0)  # the first leaves, the others wait for their slots
    time.sleep(0.3)  # the loop stalls (a loaded machine)
    await asyncio.gather(*tasks)
    gaps = [b - a for a, b in itertools.pairwise(left)]
    assert min(gaps[1:]) >= 0.045  # after the stall: one interval apart, less the clock's jitter


def test_full_jitter_backoff_stays_within_its_cap() -> None:
    policy = RetryPolicy(base=1.0, cap=60.0)
    values = [policy.delay(n) for n in range(1, 12) for _ in range(50)]
    assert all(0 <= v <= 60 for v in values)
    assert max(policy.delay(1) for _ in range(200)) <= 1.0
    assert max(policy.delay(10) for _ in range(200)) > 30


def test_the_site_mail_retries_by_the_same_policy_with_its_own_figures() -> None:
    assert RetryPolicy(base=30.0, cap=3600.0, spread=0.5) == RETRY
    first = [RETRY.delay(1) for _ in range(200)]
    assert min(first) >= 15.0
    assert max(first) <= 30.0
    assert min(RETRY.delay(20) for _ in range(200)) >= 1800.0
    assert max(RETRY.delay(20) for _ in range(200)) <= 3600.0
