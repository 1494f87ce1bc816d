"""What one run is asked to do and what it tells: the Job and Options in, Events and a RunReport
out (the engine, planning, the process layer and the command line all speak these)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from newsletter.models import DeliveryStatus, OutgoingMessage, Subscriber
from newsletter.outbox import Delivery, PlanResult
from newsletter.send.replies import Result
from newsletter.settings import BouncesSettings, SendSettings

S = DeliveryStatus
# A subscriber, the Message-ID its row holds (None: a new one) and the row's id (the VERP tag
# names it) -> that subscriber's message.
Build = Callable[[Subscriber, str | None, int], OutgoingMessage]


class Options(SendSettings):
    """[send] as configured, plus what one run is asked to do again."""

    resend_unknown: bool = False
    retry_failed: bool = False
    # The bounce policy: refusals at send time count as bounces, and the rates that stop a run.
    bounces: BouncesSettings = BouncesSettings()


class Listed(Protocol):
    """A subscriber as planning needs it: a Subscriber or a subscribers.ListRow."""

    @property
    def envelope(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class Job:
    """What to send: one issue to one list. `subscribers` reads the list anew each time it is
    called (a stream: planning stores it in the outbox a batch at a time)."""

    issue: int
    list_name: str
    subscribers: Callable[[], Iterable[Listed]]
    build: Build
    # The Message-ID `build` will give the address: planning stores it with the row.
    message_id: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Event:
    """One recorded outcome, for progress display."""

    recipient: str
    state: DeliveryStatus
    result: Result | None
    counts: Mapping[DeliveryStatus, int]
    previous: DeliveryStatus = DeliveryStatus.PENDING


@dataclass
class RunReport:
    issue: int
    list_name: str
    counts: dict[DeliveryStatus, int]
    this_run: Counter[DeliveryStatus] = field(default_factory=Counter)
    recovered: list[Delivery] = field(default_factory=list)
    stopped: str = ""
    seconds: float = 0.0
    planned: PlanResult | None = None  # None: another live worker's plan was shared
    plan_seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Every recipient sent (or skipped on purpose)."""
        return not self.stopped and all(
            n == 0 for s, n in self.counts.items() if s not in (S.SENT, S.SKIPPED)
        )
