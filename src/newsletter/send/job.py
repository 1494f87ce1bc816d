"""What one run is asked to do and what its steps return: a Job and Options in; Events, each
step's value and the RunReport built from them out (the coordinator, the engine, the process
layer and the command line all speak these)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from newsletter.config.settings import BouncesSettings, SendSettings, Settings
from newsletter.database import Delivery, PlanResult
from newsletter.importers.subscribers import ListReport
from newsletter.models import DeliveryStatus, OutgoingMessage, Subscriber
from newsletter.send.replies import Result

S = DeliveryStatus
# A subscriber, the Message-ID its row holds (None: a new one) and the row's id (the VERP tag
# names it) -> that subscriber's message.
Build = Callable[[Subscriber, str | None, int], OutgoingMessage]


class Options(SendSettings):
    """[send] as configured, plus what one run is asked to do again."""

    resend_unknown: bool = False
    retry_failed: bool = False
    timezone: str = ""  # [newsletter] timezone: where the warm-up's days begin
    # The bounce policy: refusals at send time count as bounces, and the rates that stop a run.
    bounces: BouncesSettings = BouncesSettings()

    @classmethod
    def merged(
        cls,
        settings: Settings,
        *,
        concurrency: int | None = None,
        rate: float | None = None,
        processes: int | None = None,
        resend_unknown: bool = False,
        retry_failed: bool = False,
    ) -> Options:
        """[send] and [bounces] as configured, with what the command line gives instead."""
        given = {"concurrency": concurrency, "rate": rate, "processes": processes}
        chosen = {k: v for k, v in given.items() if v is not None}
        return cls(
            **{**settings.send.model_dump(), **chosen},
            resend_unknown=resend_unknown,
            retry_failed=retry_failed,
            bounces=settings.bounces,
            timezone=settings.newsletter.timezone,
        )


class Listed(Protocol):
    """A subscriber as planning needs it: a Subscriber or a subscribers.ListRow."""

    @property
    def envelope(self) -> str: ...

    @property
    def name(self) -> str: ...


class ListSource(Protocol):
    """The list a send reads (send/recipients.py): read anew each time (a stream, stored a
    batch at a time)."""

    def read(self) -> tuple[Iterable[Listed], ListReport | None]:
        """Its rows, and the report that reading them fills (None: not a file, no report)."""
        ...


@dataclass(frozen=True)
class Job:
    """What to send: one issue to one list."""

    issue: int
    list_name: str
    subscribers: ListSource
    build: Build
    # The Message-ID `build` will give the address: planning stores it with the row.
    message_id: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Event:
    """One recorded outcome (committed to the log), for progress display; `counts` is the
    run's counts after it, a copy of its own."""

    recipient: str
    state: DeliveryStatus
    result: Result | None
    counts: Mapping[DeliveryStatus, int]
    previous: DeliveryStatus = DeliveryStatus.PENDING


def progress_figures(counts: Mapping[DeliveryStatus, int]) -> tuple[int, int, str]:
    """A run's progress from its counts: (done, total, `sent 3 deferred 1 rejected 0`). The
    total is the log's rows, not the list's: it also holds recipients sent before they left."""
    total = sum(counts.values())
    waiting = (DeliveryStatus.PENDING, DeliveryStatus.DEFERRED, DeliveryStatus.SENDING)
    done = total - sum(counts.get(state, 0) for state in waiting)
    sent, deferred = counts.get(DeliveryStatus.SENT, 0), counts.get(DeliveryStatus.DEFERRED, 0)
    states = f"sent {sent} deferred {deferred} rejected {counts.get(DeliveryStatus.REJECTED, 0)}"
    return done, total, states


def progress_line(label: str, counts: Mapping[DeliveryStatus, int], rate: float) -> str:
    """The line `send` prints every few seconds without a terminal (the worker's log too)."""
    done, total, states = progress_figures(counts)
    return f"{label}: {done}/{total} done, {states}, {rate:.0f} msg/s"


@dataclass(frozen=True)
class Planning:
    """What the plan step did: the rows it reopened, the plan's counts (None: not planned, or
    `shared`: a live worker's plan), how long it took, and what reading the list found."""

    reopened: int = 0
    result: PlanResult | None = None
    shared: bool = False
    seconds: float = 0.0
    list_report: ListReport | None = None


@dataclass(frozen=True)
class Delivered:
    """What the deliver step did: this run's outcomes by state, the rows of dead workers it
    reaped (now `unknown`), why it stopped ('' if it did not) and how long it took."""

    this_run: Mapping[DeliveryStatus, int] = field(default_factory=dict)
    reaped: tuple[Delivery, ...] = ()
    stopped: str = ""
    seconds: float = 0.0
    resumes_at: float | None = None  # stopped by the warm-up's cap: its next day (Unix time)


def plan_counts(plan: PlanResult) -> str:
    """`21 recipients (19 to send, 2 skipped)`: the parts add up to the whole; on a plan that
    resumes, what earlier runs settled is a part too, and the rows new since then are said."""
    parts = [f"{plan.waiting} to send", f"{plan.skipped} skipped"]
    if plan.earlier:
        parts.append(f"{plan.earlier} settled by earlier runs")
    new = f"; {plan.added} new since the last plan" if plan.added != plan.total else ""
    return f"{plan.total} recipients ({', '.join(parts)}{new})"


@dataclass(frozen=True)
class RunReport:
    """One run, built once from its steps' values and the log's counts at its end."""

    issue: int
    list_name: str
    counts: Mapping[DeliveryStatus, int]
    this_run: Counter[DeliveryStatus] = field(default_factory=Counter)
    recovered: tuple[Delivery, ...] = ()  # left in doubt by dead runs: now `unknown`
    stopped: str = ""
    # Paused by the warm-up's daily cap until this Unix time (its next day); None: not paused.
    resumes_at: float | None = None
    seconds: float = 0.0  # the deliver step's
    planned: PlanResult | None = None  # None: not planned, or the plan shared
    plan_shared: bool = False  # another live worker's plan was shared
    plan_seconds: float = 0.0
    list_report: ListReport | None = None

    @property
    def complete(self) -> bool:
        """Every recipient sent (or skipped on purpose)."""
        return not self.stopped and all(
            n == 0 for s, n in self.counts.items() if s not in (S.SENT, S.SKIPPED)
        )

    def summary(self) -> str:
        """The run in a line or two, as `newsletter send` ends (and a worker's log keeps):
        what planning did, then `issue N -> L: 40 sent, … (40 sent by this run in 1.2 s, …)`."""
        plan = self.planned
        planned = ""
        if plan is not None:
            planned = f"planned: {plan_counts(plan)} in {self.plan_seconds:.1f} s\n"
        elif self.plan_shared:
            planned = "planned: shared the plan of a worker already sending\n"
        parts = [f"{self.counts[s]} {s}" for s in DeliveryStatus if self.counts.get(s)]
        sent = self.this_run[DeliveryStatus.SENT]
        rate = sent / self.seconds if self.seconds > 0 else 0.0
        return planned + (
            f"issue {self.issue} -> {self.list_name}: {', '.join(parts) or 'no recipients'}"
            f" ({sent} sent by this run in {self.seconds:.1f} s, {rate:.0f} msg/s)"
        )
