"""How fast to send: a rate in, evenly spaced slots out; and how long to wait before a retry."""

from __future__ import annotations

import asyncio
import random
import time


class RateLimiter:
    """A token bucket holding one token: messages leave evenly spaced, never in bursts."""

    def __init__(self, per_second: float) -> None:
        self.interval = 0.0
        self._next = 0.0
        self.set(per_second)

    def set(self, per_second: float) -> None:
        """A new pace (0: unlimited), e.g. this worker's share of the run's rate."""
        self.interval = 1.0 / per_second if per_second > 0 else 0.0

    async def take(self) -> None:
        wait = self.take_now()
        if wait > 0:
            await asyncio.sleep(wait)

    def take_now(self) -> float:
        """Take the next slot; the seconds until it comes (0: it is free now)."""
        now = time.monotonic()
        slot = max(self._next, now)
        self._next = slot + self.interval
        return slot - now

    def ready(self) -> bool:
        """Whether a message may leave now without waiting."""
        return self._next <= time.monotonic()

    def pause(self, seconds: float) -> None:
        self._next = max(self._next, time.monotonic() + seconds)

    def slow_down(self, observed: float) -> None:
        """Halve the pace (from what the server actually took, when there was no limit)."""
        current = 1.0 / self.interval if self.interval else max(observed, 1.0)
        self.interval = 2.0 / current


def backoff(attempt: int, base: float, cap: float) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**(attempt-1))]."""
    return random.uniform(0, min(cap, base * 2 ** max(attempt - 1, 0)))
