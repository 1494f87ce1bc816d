"""The send engine: a list snapshot and a message builder in, a delivery log and a RunReport out.

The fixed pipeline of one run:

    recover   rows a crash left in `sending` become `unknown` (reported, not resent)
    reopen    `unknown` (--resend-unknown) and `failed` (--retry-failed) rows become due again
    plan      every subscriber gets a row; suppressed or departed ones waiting are `skipped`
    deliver   N workers take due rows through one token bucket per second and one per hour;
              deferred rows come back after full-jitter exponential backoff, up to max_attempts
              in this run; a circuit breaker ends the run after K connection failures in a row;
              SIGINT/SIGTERM let in-flight messages finish and be recorded, then stop.

The engine never builds MIME or speaks SMTP itself: a `build(subscriber, message_id)` callable
makes the bytes and smtp.Pool carries them. send/run.py wires the stages to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import signal
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from newsletter.bounces.policy import Policy, RateGuard
from newsletter.errors import TransportError
from newsletter.models import DeliveryStatus, OutgoingMessage, Subscriber
from newsletter.outbox import UNSUBSCRIBED, Delivery, Outbox
from newsletter.send.pacing import RateLimiter, backoff
from newsletter.send.replies import Outcome, Result, Scope
from newsletter.send.smtp import Pool
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


@dataclass(frozen=True)
class Job:
    """What to send: one issue to one list, subscribers keyed by their normalised address."""

    issue: int
    list_name: str
    subscribers: Mapping[str, Subscriber]
    build: Build
    # The Message-ID `build` will give a subscriber: planning stores it with the row.
    message_id: Callable[[Subscriber], str] | None = None


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

    @property
    def complete(self) -> bool:
        """Every recipient sent (or skipped on purpose)."""
        return not self.stopped and all(
            n == 0 for s, n in self.counts.items() if s not in (S.SENT, S.SKIPPED)
        )


class Engine:
    def __init__(
        self,
        job: Job,
        pool: Pool,
        outbox: Outbox,
        options: Options,
        progress: Callable[[Event], None] | None = None,
    ) -> None:
        self.job = job
        self.pool = pool
        self.outbox = outbox
        self.options = options
        self.progress = progress
        self.per_second = RateLimiter(options.rate)
        self.per_hour = RateLimiter(options.rate_per_hour / 3600.0)
        self.report = RunReport(job.issue, job.list_name, {})
        self._queue: list[tuple[float, int, Delivery]] = []
        self._tries: Counter[int] = Counter()
        self._in_flight = 0
        self._failures = 0
        self._throttles = 0
        self._stopping = False
        self._started = 0.0
        self._sent = 0
        self._counts: dict[DeliveryStatus, int] = {}
        self._current: dict[int, DeliveryStatus] = {}
        self._suppressed_set: frozenset[str] = frozenset()
        self._suppressed_at = -1e9
        self._seq = 0
        self._built: dict[int, OutgoingMessage] = {}  # row id -> its message, built ahead
        self._policy = Policy(outbox, options.bounces)
        self._rates = RateGuard(outbox, options.bounces, job.issue, job.list_name)

    def _suppressed(self) -> frozenset[str]:
        """Unsubscribes arriving during the run, re-read every few seconds (not per message)."""
        now = time.monotonic()
        if now - self._suppressed_at > 2.0:
            self._suppressed_at = now
            self._suppressed_set = self.outbox.suppressed(self.job.list_name)
        return self._suppressed_set

    def stop(self, reason: str) -> None:
        """Finish what is in flight, start nothing new."""
        if not self._stopping:
            self._stopping = True
            self.report.stopped = reason

    # -- the run ------------------------------------------------------------------------------

    async def run(self, rows: list[Delivery]) -> RunReport:
        job = self.job
        self._counts = self.outbox.counts(job.issue, job.list_name)
        self._started = time.monotonic()
        for seq, row in enumerate(rows):
            # Deferred rows keep the pause the last run chose for them; the rest go now.
            wait = max(0.0, row.next_attempt_at - time.time()) if row.state == S.DEFERRED else 0.0
            heapq.heappush(self._queue, (time.monotonic() + min(wait, 5.0), seq, row))
        self._seq = len(rows)
        workers = [asyncio.create_task(self._work()) for _ in range(self.options.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await self.pool.close()
        self.report.counts = self.outbox.counts(job.issue, job.list_name)
        self.report.seconds = time.monotonic() - self._started
        return self.report

    async def _work(self) -> None:
        while not self._stopping:
            if not self._queue:
                if self._in_flight == 0:
                    return
                await asyncio.sleep(0.02)
                continue
            ready, _, row = self._queue[0]
            now = time.monotonic()
            if ready > now:
                await asyncio.sleep(min(ready - now, 0.05))
                continue
            heapq.heappop(self._queue)
            self._in_flight += 1
            try:
                await self._attempt(row)
            finally:
                self._in_flight -= 1

    async def _attempt(self, row: Delivery) -> None:
        await self.per_hour.take()
        await self.per_second.take()
        if self._stopping:
            return
        message = self._built.pop(row.id, None)
        if row.recipient in self._suppressed():
            self._record(row, S.SKIPPED, None, reply=UNSUBSCRIBED)
            return
        if message is None:
            try:
                message = self._build(row)
            except Exception as exc:  # one recipient's bad data must not end the run
                self._record(row, S.FAILED, None, reply=f"cannot build the message: {exc}")
                return
        accepted = False

        def on_accepted() -> None:
            nonlocal accepted
            accepted = True
            # A row planned with its Message-ID (the message carries it) keeps it untouched.
            known = row.message_id is not None and row.message_id == message.message_id
            self.outbox.mark_sending(row.id, None if known else message.message_id)

        try:
            result = await self.pool.send(message, on_accepted, self._build_next)
        except asyncio.CancelledError:
            if accepted:
                self._record(row, S.UNKNOWN, None, reply="stopped during DATA", attempted=False)
            raise
        except TransportError as exc:
            # A reconnect met a setup fault (certificate, AUTH): no message can go out now. The
            # row was not attempted; the run stops resumable rather than failing as a whole.
            self.stop(f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
            return
        self._handle(row, result, attempted=not accepted)

    def _build(self, row: Delivery) -> OutgoingMessage:
        return self.job.build(self.job.subscribers[row.recipient], row.message_id, row.id)

    def _build_next(self) -> None:
        """Build the next row's message while the server takes in an upload, so the CPU does
        it then rather than after the reply (with one connection it was idle then)."""
        if self._stopping or not self._queue:
            return
        row = self._queue[0][2]
        if row.id in self._built:
            return
        # A message that cannot be built is built again by its attempt, which records why.
        with contextlib.suppress(Exception):
            self._built[row.id] = self._build(row)

    def _handle(self, row: Delivery, result: Result, *, attempted: bool) -> None:
        outcome, opts = result.outcome, self.options
        if result.scope == Scope.CONNECTION:
            self._failures += 1
            if self._failures >= opts.breaker_threshold:
                self.stop(
                    f"{self._failures} connection failures in a row"
                    f" (last: {result.describe()}): circuit breaker open"
                )
        else:
            self._failures = 0
        if outcome == Outcome.THROTTLED:
            self._throttles += 1
            pause = backoff(self._throttles + 1, opts.retry_base, opts.retry_cap)
            elapsed = max(time.monotonic() - self._started, 1e-3)
            self.per_second.slow_down(self._sent / elapsed)
            self.per_second.pause(pause)
            if self._throttles >= opts.breaker_threshold:
                self.stop(f"the server keeps throttling us ({result.describe()})")
        elif outcome == Outcome.SENT:
            self._throttles = 0
        if outcome == Outcome.SENT:
            self._sent += 1
            self._record(row, S.SENT, result)
        elif outcome == Outcome.REJECTED:
            self._record(row, S.REJECTED, result, attempted=attempted)
            if result.code is not None:
                self._policy.refused(row, result.code, result.reply)
        elif outcome == Outcome.FAILED:
            self._record(row, S.FAILED, result, attempted=attempted)
        elif outcome == Outcome.UNKNOWN:
            self._record(row, S.UNKNOWN, result)
        elif outcome == Outcome.STOPPED:
            self._record(row, S.DEFERRED, result, attempted=attempted)
            self.stop(f"the server refuses to take more mail: {result.describe()}")
        else:  # DEFERRED, RETRY, THROTTLED: not delivered, nothing in doubt
            self._retry(row, result, attempted=attempted)
        if outcome in (Outcome.SENT, Outcome.REJECTED):
            reason = self._rates.check(rejected=outcome == Outcome.REJECTED)
            if reason:
                self.stop(f"{reason}: stopped to protect the sender's reputation")

    def _retry(self, row: Delivery, result: Result, *, attempted: bool) -> None:
        opts = self.options
        self._tries[row.id] += 1
        tries = self._tries[row.id]
        delay = backoff(tries, opts.retry_base, opts.retry_cap)
        self._record(
            row, S.DEFERRED, result, attempted=attempted, next_attempt_at=time.time() + delay
        )
        if tries < opts.max_attempts and not self._stopping:
            self._seq += 1
            heapq.heappush(self._queue, (time.monotonic() + delay, self._seq, row))

    def _record(
        self,
        row: Delivery,
        state: DeliveryStatus,
        result: Result | None,
        *,
        reply: str = "",
        attempted: bool = False,
        next_attempt_at: float = 0.0,
    ) -> None:
        self.outbox.record(
            row.id,
            state,
            code=result.code if result else None,
            reply=result.reply if result else reply,
            attempted=attempted,
            next_attempt_at=next_attempt_at,
        )
        previous = self._current.get(row.id, row.state)
        self._current[row.id] = state
        self._counts[previous] = self._counts.get(previous, 0) - 1
        self._counts[state] = self._counts.get(state, 0) + 1
        self.report.this_run[state] += 1
        if self.progress:
            self.progress(Event(row.recipient, state, result, self._counts, previous))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed: it roughly halves the event loop's share of each message."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


SIGNALS = (signal.SIGINT, signal.SIGTERM)


def announce(
    recovered: list[Delivery],
    job: Job,
    outbox: Outbox,
    progress: Callable[[Event], None] | None,
) -> None:
    """Tell the display right away about rows a crash left in doubt (now `unknown`)."""
    if progress is None or not recovered:
        return
    counts = outbox.counts(job.issue, job.list_name)
    for row in recovered:
        result = Result(Outcome.UNKNOWN, Scope.CONNECTION, None, row.smtp_reply)
        progress(Event(row.recipient, S.UNKNOWN, result, counts, S.SENDING))


def plan(job: Job, outbox: Outbox, options: Options) -> tuple[list[Delivery], list[Delivery]]:
    """Recover, reopen and plan: (the rows this run attempts, the rows a crash left in doubt)."""
    recovered = outbox.recover(job.issue, job.list_name)
    reopen = [S.UNKNOWN] if options.resend_unknown else []
    reopen += [S.FAILED] if options.retry_failed else []
    outbox.reopen(job.issue, job.list_name, reopen)
    ids = job.message_id
    message_ids = {k: ids(sub) for k, sub in job.subscribers.items()} if ids else None
    outbox.plan(job.issue, job.list_name, job.subscribers, message_ids)
    return outbox.due(job.issue, job.list_name), recovered


async def deliver(
    job: Job,
    pool: Pool,
    outbox: Outbox,
    options: Options,
    progress: Callable[[Event], None] | None = None,
    *,
    signals: tuple[signal.Signals, ...] = SIGNALS,
    rows: list[Delivery] | None = None,
) -> RunReport:
    """Run one send to the end, a stop, or a signal: the first lets in-flight messages finish
    and be recorded; a second abandons them (recorded `unknown` if their upload had begun).
    `rows` skips planning (a worker process gets its share of a plan made by its parent)."""
    engine = Engine(job, pool, outbox, options, progress)
    if rows is None:
        rows, engine.report.recovered = plan(job, outbox, options)
        announce(engine.report.recovered, job, outbox, progress)
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    abandoned = False

    def on_signal(signum: int) -> None:
        nonlocal abandoned
        if engine.report.stopped and task is not None:
            abandoned = True
            task.cancel()
        engine.stop(f"stopped by {signal.Signals(signum).name}")

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await engine.run(rows)
    except asyncio.CancelledError:
        if not abandoned:
            raise
        engine.report.counts = outbox.counts(job.issue, job.list_name)
        return engine.report
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
