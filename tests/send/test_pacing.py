"""Pacing without a server: the token bucket and the retry backoff."""

from __future__ import annotations

import asyncio
import itertools
import time

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
    values = [backoff(n, 1.0, 60.0) for n in range(1, 12) for _ in range(50)]
    assert all(0 <= v <= 60 for v in values)
    assert max(backoff(1, 1.0, 60.0) for _ in range(200)) <= 1.0
    assert max(backoff(10, 1.0, 60.0) for _ in range(200)) > 30
