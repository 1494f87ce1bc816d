"""One send from its lease to its retirement: a Prepared send and Options in, a RunReport out.

The steps of every run, in this order, each returning its value:

    lease     this worker registered on (issue, list), its lease renewed until the run ends
    recover   rows a dead run left in `sending` become `unknown` (reported, never resent alone)
    reopen    `unknown` (--resend-unknown) and `failed` (--retry-failed) rows due again
    plan      the list streamed into the outbox, or a live worker's plan shared (planning.py)
    deliver   the engine in this process (engine.py), or in N worker processes (processes.py)
    retire    the worker's unstarted claims freed, its record closed

The RunReport is built once from those values and the log's counts at the end. `send` is the
command's run: a staging list's test begun first (testsend.py: its deliveries restarted when
it is a new one), the email's tracked links recorded (so `serve` redirects every click token
of this send to the link its message carried), the SMTP server checked, then the steps, on
SQLite under the send lock of (issue, list), on PostgreSQL as one of the workers that share
the send. `work` is a worker process's run: the same steps less recover, reopen and plan,
which its parent did.

Signals (SIGINT, SIGTERM): before anything goes out (the check, the lease, planning) the first
stops the run at once, since nothing is in flight and every step so far is committed or rolled
back; the report says `stopped by SIGTERM` (exit code 4: the re-run resumes). While delivering,
the first lets the messages in flight finish and be recorded; a second abandons them (recorded
`unknown` if their upload had begun). Once delivering ends, a signal changes nothing: the run
is retiring.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import FrameType

from newsletter.database import Database, Delivery, Durability, open_database
from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus
from newsletter.send import planning
from newsletter.send.engine import Engine
from newsletter.send.job import Delivered, Event, Job, Options, Planning, RunReport
from newsletter.send.lease import LEASE_LOST, Lease, LeaseLostError, worker_id
from newsletter.send.preparation import Prepared, smtp_pool
from newsletter.send.replies import Outcome, Result, Scope
from newsletter.send.smtp import Pool
from newsletter.send.testsend import begin as begin_test
from newsletter.state.statefiles import held_lock

S = DeliveryStatus
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Seconds of planning after which the session the check opened is not trusted any more: relays
# drop idle sessions (smtp-sink after 100 s), and sending opens fresh ones.
IDLE_SESSION = 10.0
Progress = Callable[[Event], None] | None
# The deliver step: this worker's lease and the plan step's value in, its own value out.
Deliver = Callable[[Lease, Planning], Delivered]
MakePool = Callable[[int], Pool]


class Interrupted(KeyboardInterrupt):
    """A signal that stops a run before it delivers, raised wherever the process is. A
    KeyboardInterrupt, so that psycopg cancels a statement in flight and keeps the connection."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class Interrupts:
    """SIGINT and SIGTERM (or `signals`) for the length of a run: the first raises Interrupted
    while `raising`; any other is only noted (a stop is under way, or the run is retiring)."""

    def __init__(self, signals: tuple[signal.Signals, ...] = SIGNALS) -> None:
        # Off the main thread (a program that calls the library's send from a thread of its
        # own) the signals are that program's: Python lets only the main thread handle them.
        self.signals = signals if threading.current_thread() is threading.main_thread() else ()
        self.raising = True
        self.received = ""
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Interrupts:
        self._previous = {s: signal.getsignal(s) for s in self.signals}
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def install(self) -> None:
        """(Again, after a step that handled the signals itself.)"""
        for signum in self.signals:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = not self.received
        self.received = self.received or signal.Signals(signum).name
        if first and self.raising:
            raise Interrupted(self.received)


class Run:
    """One worker's run of one send: the steps, in order (see the module's docstring)."""

    def __init__(
        self,
        job: Job,
        database: Database,
        options: Options,
        progress: Progress,
        interrupts: Interrupts,
        worker: str,
    ) -> None:
        self.job = job
        self.database = database
        self.options = options
        self.progress = progress
        self.interrupts = interrupts
        self.worker = worker

    def steps(self, deliver: Deliver, *, plans: bool = True) -> RunReport:
        """Every step; `plans` False skips recover, reopen and plan (a worker process)."""
        job = self.job
        recovered: list[Delivery] = []
        planned = Planning()
        delivered = Delivered()
        with self._lease() as lease:  # lease ... retire
            try:
                if plans:
                    recovered = self.recover(lease)
                    planned = self.plan(lease)
                delivered = deliver(lease, planned)
            except Interrupted as signalled:
                delivered = Delivered(stopped=f"stopped by {signalled.name}")
            except LeaseLostError:
                delivered = Delivered(stopped=LEASE_LOST)
            finally:
                self.interrupts.raising = False  # retiring: a signal changes nothing now
        return RunReport(
            job.issue,
            job.list_name,
            self.database.deliveries.counts(job.issue, job.list_name),
            this_run=Counter(delivered.this_run),
            recovered=(*recovered, *delivered.reaped),
            stopped=delivered.stopped,
            resumes_at=delivered.resumes_at,
            seconds=delivered.seconds,
            planned=planned.result,
            plan_shared=planned.shared,
            plan_seconds=planned.seconds,
            list_report=planned.list_report,
        )

    def _lease(self) -> Lease:
        job = self.job
        return Lease(self.database, self.worker, job.issue, job.list_name, self.options.lease)

    def recover(self, lease: Lease) -> list[Delivery]:
        recovered = planning.recover(self.job, self.database, lease.worker)
        self._announce(recovered)
        return recovered

    def plan(self, lease: Lease) -> Planning:
        """reopen, then plan, under the send's planning lock (the lease kept while waiting
        for it and between batches)."""
        job, started = self.job, time.monotonic()
        with (
            lease.kept_alive(),
            self.database.plans.lock(job.issue, job.list_name, waiting=lease.keep),
        ):
            reopened = planning.reopen(job, self.database, self.options)
            result, report = planning.plan(job, self.database, lease.worker, lease.keep)
        if not lease.renew():  # planning's last statements may have taken a while
            raise LeaseLostError(LEASE_LOST)
        seconds = time.monotonic() - started
        return Planning(reopened, result, result is None, seconds, report)

    async def engine(self, pool: Pool, lease: Lease, planned: Planning) -> Delivered:
        """The deliver step in this process. The first signal stops the engine gracefully,
        a second abandons the uploads in flight."""
        if planned.seconds > IDLE_SESSION:
            await pool.close()
        engine = Engine(self.job, pool, self.database, self.options, self.progress, lease=lease)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(engine.run())
        abandoned = False

        def on_signal(signum: int) -> None:
            nonlocal abandoned
            if engine.stopping:
                abandoned = True
                task.cancel()
            engine.stop(f"stopped by {signal.Signals(signum).name}")

        signals = self.interrupts.signals
        for signum in signals:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            delivered = await task
        except asyncio.CancelledError:
            if not abandoned:
                raise
            delivered = engine.delivered()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            self.interrupts.raising = False  # delivering is over: a signal changes nothing
            self.interrupts.install()
        return dataclasses.replace(delivered, resumes_at=engine.pace.resumes_at(delivered.stopped))

    def _announce(self, recovered: list[Delivery]) -> None:
        """Tell the display right away about rows a crash left in doubt (now `unknown`)."""
        if self.progress is None or not recovered:
            return
        counts = self.database.deliveries.counts(self.job.issue, self.job.list_name)
        for row in recovered:
            result = Result(Outcome.UNKNOWN, Scope.CONNECTION, None, row.smtp_reply)
            self.progress(Event(row.recipient, S.UNKNOWN, result, dict(counts), S.SENDING))


def send(
    prepared: Prepared, database: Database, options: Options, progress: Progress = None
) -> RunReport:
    """The command's run: the SMTP server checked, then every step, with the engine in this
    process or (options.processes > 1) in worker processes. `database`: the command's (its
    caller's to close), which this process's steps write through."""
    settings, job = prepared.settings, prepared.job
    make_pool = functools.partial(smtp_pool, settings)
    with Interrupts() as interrupts:
        try:
            with _alone(settings.state_dir, database, job):
                if prepared.test is not None:  # a staging list: this test begun, or joined
                    begin_test(prepared.test, job.issue, job.list_name, database)
                record_tracked_links(prepared, database)
                return _run(job, database, options, progress, interrupts, make_pool)
        except Interrupted as signalled:  # before the lease: nothing planned, nothing sent
            return RunReport(job.issue, job.list_name, {}, stopped=f"stopped by {signalled.name}")


def record_tracked_links(prepared: Prepared, database: Database) -> None:
    """Before the first message of a run goes out, the outbox holds the links its messages
    carry, by place (docs/guide/tracking.md). Nothing when [tracking] clicks is off."""
    tracked = prepared.tracked
    if tracked is None or not tracked.links:
        return
    mode = prepared.settings.tracking.clicks
    database.sent_links.record(prepared.job.issue, prepared.job.list_name, mode, tracked.links)


def _run(
    job: Job,
    database: Database,
    options: Options,
    progress: Progress,
    interrupts: Interrupts,
    make_pool: MakePool,
) -> RunReport:
    run = Run(job, database, options, progress, interrupts, worker_id())
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        if options.processes <= 1:
            pool = make_pool(options.concurrency)
            runner.run(_check(pool, keep=True))
            return run.steps(lambda lease, planned: runner.run(run.engine(pool, lease, planned)))
        runner.run(_check(make_pool(1), keep=False))
    from newsletter.send import processes  # worker processes only: not every send

    def in_processes(lease: Lease, planned: Planning) -> Delivered:
        interrupts.raising = False  # the parent's own handlers decide while workers deliver
        work = functools.partial(_work, make_pool=make_pool)
        return processes.deliver(job, database, options, lease, progress, work)

    return run.steps(in_processes)


async def _check(pool: Pool, *, keep: bool) -> None:
    """Connect once before anything is planned to go out; `keep` the session for sending."""
    try:
        await pool.check()
    except BaseException:
        await pool.close()
        raise
    if not keep:
        await pool.close()


def _work(
    worker: str,
    job: Job,
    options: Options,
    target: Path | str,
    durability: Durability,
    lock_wait: float,
    progress: Progress,
    *,
    make_pool: MakePool,
) -> Delivered:
    """A worker process's run (processes.py forks it): lease, deliver, retire; its parent
    recovered and planned. SIGINT is the parent's to decide; SIGTERM stops it (a second
    abandons its uploads). It opens a connection of its own: its parent's belongs to the
    parent (Database.disconnected)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with (
        Interrupts((signal.SIGTERM,)) as interrupts,
        open_database(target, durability=durability, lock_wait=lock_wait) as database,
        asyncio.Runner(loop_factory=event_loop_factory()) as runner,
    ):
        run = Run(job, database, options, progress, interrupts, worker)
        pool = make_pool(options.concurrency)
        report = run.steps(
            lambda lease, planned: runner.run(run.engine(pool, lease, planned)), plans=False
        )
    return Delivered(
        report.this_run, report.recovered, report.stopped, report.seconds, report.resumes_at
    )


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed: it takes a good share off the event loop's cost per
    message (see docs/benchmarks.md)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _alone(state_dir: Path, database: Database, job: Job) -> AbstractContextManager[None]:
    """SQLite: the send lock (one send per issue and list). PostgreSQL: none, the workers
    share the send."""
    if database.shared:
        return nullcontext()
    return send_lock(state_dir, job.issue, job.list_name)


def send_lock(state_dir: Path, issue: int, list_name: str) -> AbstractContextManager[None]:
    """One send per (issue, list) at a time (the lock dies with the process)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", list_name)

    def refused(pid: str) -> DeliveryError:
        return DeliveryError(
            f"another `newsletter send` of issue {issue} to {list_name!r} is running (pid {pid})",
            hint="Wait for it to finish, or stop it (Ctrl-C); then re-run to resume.",
        )

    return held_lock(state_dir / f"send-{issue}-{safe}.lock", refused)
