"""How fast to send: a rate in, evenly spaced slots out; and how long to wait before a retry."""

from __future__ import annotations

import asyncio
import random
import time


class RateLimiter:
    """A token bucket holding one token: messages leave evenly spaced, never in bursts.

    A slot is claimed when the message leaves, never reserved ahead: a caller that waited wakes,
    then claims only if its slot is still free (else it waits again). Reserved slots would all
    fall due during a stall of the event loop (a loaded machine) and their messages leave
    together when it ends."""

    def __init__(self, per_second: float) -> None:
        self.interval = 0.0
        self._next = 0.0
        self.set(per_second)

    def set(self, per_second: float) -> None:
        """A new pace (0: unlimited), e.g. this worker's share of the run's rate."""
        self.interval = 1.0 / per_second if per_second > 0 else 0.0

    async def take(self) -> None:
        """Wait for the next free slot and claim it."""
        while (wait := self._next - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        self.take_now()

    def take_now(self) -> float:
        """Claim the next slot; the seconds it was still away (0: it was free now). The slot
        after it is one interval from now or from this one, whichever is later."""
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
