"""How fast to send: a rate in, evenly spaced slots out; how long to wait before a retry; and
how long each destination that throttled us rests while the rest of the list goes on."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from newsletter.config.settings import SendSettings
from newsletter.send.warmup import Pause, Warmup


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


@dataclass(frozen=True)
class RetryPolicy:
    """When a deferred message is tried again: the one rule of the send's engine and the site's
    mail (courier.py), each with its own figures. Jittered (AWS architecture blog): uniform in
    [(1 - spread) * d, d] for d = min(cap, base * 2**(attempt-1)), so retries of many rows spread
    instead of returning in step to a server that asked for less; `spread` 1 is full jitter."""

    base: float  # seconds: the first retry comes within this
    cap: float  # seconds: the longest wait between two tries
    spread: float = 1.0  # the share of each wait drawn at random (the rest is waited anyway)

    def delay(self, attempt: int) -> float:
        """Seconds before try `attempt + 1`, after `attempt` tries (1: the first failed)."""
        longest = min(self.cap, self.base * 2 ** max(attempt - 1, 0))
        return random.uniform((1 - self.spread) * longest, longest)


def domain_of(recipient: str) -> str:
    """A recipient's domain, the unit a destination's throttle applies to."""
    return recipient.rpartition("@")[2].lower().rstrip(".")


@dataclass
class Throttle:
    """One destination's standing: throttles in a row, until when it rests, its last reply."""

    strikes: int = 0
    until: float = 0.0
    reply: str = ""


class Destinations:
    """Recipient domains that asked us to slow down (Gmail's 421 4.7.28, Yahoo's TSS04,
    Microsoft's 4.7.650: replies.py's DESTINATION scope), each with a backoff of its own: half
    of `base * 2**(strikes-1)` (at most `cap`) plus up to as much again at random, so a domain
    really rests while the rest of the list goes on. A message it takes ends its backoff. After
    `stuck_after` throttles in a row it is `stuck`. Times are wall-clock seconds, as the
    outbox's `next_attempt_at` (its rows are handed back due when the domain is)."""

    def __init__(
        self,
        base: float,
        cap: float,
        stuck_after: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._base, self._cap, self._stuck_after = base, cap, stuck_after
        self._clock = clock
        self._domains: dict[str, Throttle] = {}

    def resting(self, recipient: str) -> float:
        """When the recipient's domain may be sent to again; 0.0: now."""
        throttle = self._domains.get(domain_of(recipient))
        if throttle is None or throttle.until <= self._clock():
            return 0.0
        return throttle.until

    def throttled(self, recipient: str, reply: str) -> float:
        """The domain throttled us again: when it may be sent to next."""
        throttle = self._domains.setdefault(domain_of(recipient), Throttle())
        throttle.strikes += 1
        throttle.reply = reply
        ceiling = min(self._cap, self._base * 2 ** (throttle.strikes - 1))
        rest = ceiling / 2 + random.uniform(0, ceiling / 2)
        throttle.until = max(throttle.until, self._clock() + rest)
        return throttle.until

    def accepted(self, recipient: str) -> None:
        self._domains.pop(domain_of(recipient), None)

    def resting_domains(self) -> list[str]:
        """The domains resting now: their rows are not claimed meanwhile."""
        now = self._clock()
        return [d for d, t in self._domains.items() if t.until > now]

    def next_due(self, due: float | None, resting: Sequence[str] = ()) -> float | None:
        """When something may be sent next: `due` (the outbox's next row of another domain)
        or the end of the first rest, whichever comes first; None: neither. `resting`: the
        domains the look for `due` left out. Their rows are still to send even when their rest
        has ended since that look (a slow query on a loaded database): their end, past or not,
        counts, so the caller looks again rather than ending the run with them unsent."""
        now = self._clock()
        ends = [t.until for d, t in self._domains.items() if d in resting or t.until > now]
        return min([*ends, *([] if due is None else [due])], default=None)

    def stuck_before(self, due: float | None, resting: Sequence[str]) -> str:
        """The `resting` domains (those the look for `due` left out: one reading of the clock
        for both), named with their last reply, if each of them is stuck and no other row falls
        due (`due`) before they may be sent to again: all that is left waits for destinations
        that keep throttling us. '' otherwise."""
        throttles = {d: self._domains[d] for d in resting if d in self._domains}
        if not throttles or any(t.strikes < self._stuck_after for t in throttles.values()):
            return ""
        if due is not None and due < min(t.until for t in throttles.values()) - 0.01:
            return ""
        return "; ".join(f"{d} ({t.reply})" for d, t in throttles.items())


class Pacer:
    """This worker's pace: its share of the run's rates (a token bucket per second and one per
    hour), slowed for the whole run when the relay itself throttles (an ACCOUNT throttle), and
    each destination's own rest (`destinations`)."""

    def __init__(self, send: SendSettings, warmup: Warmup | None = None) -> None:
        self.warmup = warmup  # today's cap, counted as messages are taken
        self.paused: Pause | None = None  # the warm-up's stop, once take() has given it
        self.rate, self.rate_per_hour = send.rate, send.rate_per_hour
        self.per_second = RateLimiter(send.rate)
        self.per_hour = RateLimiter(send.rate_per_hour / 3600.0)
        base, cap = send.retry_base, send.retry_cap
        self.destinations = Destinations(base, cap, send.breaker_threshold)
        self._base, self._cap = base, cap
        self.throttles = 0  # the relay's throttles since a message went out

    def share(self, workers: int) -> int:
        """This worker's part of the run's rates (the rate is the whole run's); `workers`."""
        self.per_second.set(self.rate / workers)
        self.per_hour.set(self.rate_per_hour / 3600.0 / workers)
        if self.warmup is not None:  # the log's count of today, every worker's sends in it
            self.warmup.refresh()
        return workers

    async def take(self) -> str:
        """Wait for a slot and take it; the warm-up's stop line instead when today's cap is
        spent ('' otherwise)."""
        if self._spent():
            assert self.warmup is not None
            self.paused = self.warmup.pause()
            return self.paused.line
        await self.per_hour.take()
        await self.per_second.take()
        self._count()
        return ""

    def take_now(self) -> bool:
        """A slot taken now if both rates (and the warm-up) allow one without waiting."""
        if self._spent() or not (self.per_hour.ready() and self.per_second.ready()):
            return False
        self.per_hour.take_now()
        self.per_second.take_now()
        self._count()
        return True

    def resumes_at(self, stopped: str) -> float | None:
        """When the warm-up's pause ends (a Unix time) if `stopped`, the run's stop, was the
        pause take() gave (the engine keeps the first stop: a SIGTERM before it is not one)."""
        if self.paused is not None and stopped == self.paused.line:
            return self.paused.until
        return None

    def _spent(self) -> bool:
        return self.warmup is not None and self.warmup.left() == 0

    def _count(self) -> None:
        """A message taken counts against today's cap at once, so the messages in flight never
        overshoot it; one that is not sent is given back when the log is read again."""
        if self.warmup is not None:
            self.warmup.sent += 1

    def slow_down(self, observed: float) -> int:
        """The relay throttled us: halve the pace, pause, and count it."""
        self.throttles += 1
        self.per_second.slow_down(observed)
        self.per_second.pause(RetryPolicy(self._base, self._cap).delay(self.throttles + 1))
        return self.throttles

    def sent(self, recipient: str) -> None:
        self.throttles = 0
        self.destinations.accepted(recipient)
