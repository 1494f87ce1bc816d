"""The deliver step split over worker processes: a planned run in, the same events and the
step's value (Delivered) out.

A single Python process tops out at one core, and on loopback-fast servers building, recording
and uploading messages is CPU-bound. With `processes = N` the parent plans the run as usual, then
forks N workers; each is a worker of the send like one on another machine (its own lease, its
own claims from the outbox, its share of the rate), with its share of the connections, its own
event loop, SMTP pool and outbox connection: it runs the coordinator's worker steps (`work`,
handed in, so this module never imports the coordinator that drives it). Each streams typed
messages back through its pipe: `Recorded` (a batch of committed outcomes), `Stopped` (why it
stopped, if it did). The parent keeps the counts and the display, and its own lease renewed.

A worker never outlives its parent: the kernel sends it SIGKILL the moment the parent dies
(PR_SET_PDEATHSIG; elsewhere a watchdog thread polls the parent), so `kill -9` of a send leaves at
most the uploads in flight in doubt, exactly as with one process; and it keeps none of the
descriptors it inherited but its pipe (children.py). Ctrl-C reaches the whole process
group; workers ignore SIGINT and take their orders from the parent, which turns the first SIGINT
or SIGTERM into a graceful stop of every worker and a second one into abandoning the uploads.
When one worker stops the run (circuit breaker, quota), the parent stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkProcess
from pathlib import Path
from types import FrameType

from newsletter.database import Database, Delivery, Durability
from newsletter.errors import DatabaseError, NewsletterError
from newsletter.models import DeliveryStatus
from newsletter.send.children import detach
from newsletter.send.job import Delivered, Event, Job, Options
from newsletter.send.lease import Lease
from newsletter.send.replies import Outcome, Result, Scope

# A worker's run: its worker id, the job, its share of the options, where the outbox is, its
# durability and where its events go -> what it delivered.
Work = Callable[
    [str, Job, Options, Path | str, Durability, float, Callable[[Event], None]], Delivered
]
# A worker sends its events in batches rather than a pickle and a pipe write per message: a
# batch leaves when it holds this many, after this long, or at once when it carries something
# other than `sent` (a line the parent prints).
BATCH = 100
BATCH_DELAY = 0.1

# One event as it crosses the pipe: recipient, state before, state after, the result.
Change = tuple[str, DeliveryStatus, DeliveryStatus, Result | None]


@dataclass(frozen=True)
class Recorded:
    """Outcomes a worker committed, in order."""

    changes: list[Change]


@dataclass(frozen=True)
class Stopped:
    """Why a worker stopped before the send was done (a quota, a lost lease, a fault)."""

    reason: str
    resumes_at: float | None = None  # the warm-up's pause: when its next day begins
    # A fault of the database (its disk full, its connection lost): its message and hint, raised
    # again in the parent, so it reads the same whichever process met it first.
    fault: tuple[str, str] | None = None


@dataclass(frozen=True)
class Share:
    index: int
    worker: str
    options: Options


def split(options: Options, processes: int, parent: str) -> list[Share]:
    """A fair part of the connections to each worker; the rates are the run's (each engine
    takes its part of them from the number of live workers)."""
    processes = max(1, min(processes, options.concurrency))
    shares = []
    for k in range(processes):
        connections = options.concurrency // processes + (k < options.concurrency % processes)
        part = options.model_copy(update={"concurrency": connections})
        shares.append(Share(k, f"{parent}/{k}", part))
    return shares


def deliver(
    job: Job,
    database: Database,
    options: Options,
    lease: Lease,
    progress: Callable[[Event], None] | None,
    work: Work,
) -> Delivered:
    """Deliver a send already planned in `outbox` with `options.processes` forked workers,
    each running `work`; the parent keeps `lease` (its planning) renewed meanwhile."""
    counts = dict(database.deliveries.counts(job.issue, job.list_name))
    this_run: Counter[DeliveryStatus] = Counter()
    stopped = ""
    resumes_at: float | None = None
    fault: tuple[str, str] | None = None
    shares = split(options, options.processes, lease.worker)
    context = multiprocessing.get_context("fork")
    parent = os.getpid()
    workers: dict[Connection, ForkProcess] = {}
    with database.disconnected():  # each worker opens its own connection, none inherited
        for share in shares:
            receive, send = context.Pipe(duplex=False)
            proc = context.Process(
                target=_worker,
                args=(
                    share,
                    job,
                    database.target,
                    database.durability,
                    database.lock_wait,
                    work,
                    send,
                    parent,
                ),
                name=f"newsletter-send-{share.index}",
                daemon=True,
            )
            proc.start()
            send.close()
            workers[receive] = proc

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopped
        stopped = stopped or f"stopped by {signal.Signals(signum).name}"
        _tell(workers.values())

    # Off the main thread (the library called from a thread) the signals are the caller's.
    ours = threading.current_thread() is threading.main_thread()
    handled = (signal.SIGINT, signal.SIGTERM) if ours else ()
    previous = {s: signal.signal(s, on_signal) for s in handled}
    started = renewed = time.monotonic()
    try:
        open_pipes = list(workers)
        while open_pipes:
            if time.monotonic() - renewed > lease.interval:
                renewed = time.monotonic()
                lease.renew()
            for pipe in wait(open_pipes, timeout=0.5):
                assert isinstance(pipe, Connection)
                try:
                    message = pipe.recv()
                except EOFError:
                    open_pipes.remove(pipe)
                    continue
                if isinstance(message, Recorded):
                    for recipient, before, state, result in message.changes:
                        counts[before] -= 1
                        counts[state] += 1
                        this_run[state] += 1
                        if progress is not None:
                            progress(Event(recipient, state, result, dict(counts), before))
                elif isinstance(message, Stopped) and not stopped:
                    stopped, resumes_at = message.reason, message.resumes_at
                    fault = message.fault
                    _tell(p for c, p in workers.items() if c is not pipe)
        for proc in workers.values():
            proc.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for proc in workers.values():
            if proc.is_alive():
                proc.kill()
                proc.join()
    crashed = [p for p in workers.values() if p.exitcode not in (0, None)]
    if crashed and not stopped:
        stopped = f"a worker process died (exit code {crashed[0].exitcode})"
    # Uploads a dead worker left in `sending` are in doubt now, not at the next run (nor when
    # its lease expires: the parent saw it die).
    dead = [s.worker for s, p in zip(shares, workers.values(), strict=True) if p in crashed]
    if fault is not None:
        with contextlib.suppress(DatabaseError):  # the same fault may meet this one too
            database.leases.reap(job.issue, job.list_name, dead=dead)
        raise DatabaseError(fault[0], hint=fault[1])
    reaped = database.leases.reap(job.issue, job.list_name, dead=dead)
    _announce(reaped, counts, progress)
    return Delivered(dict(this_run), tuple(reaped), stopped, time.monotonic() - started, resumes_at)


def _announce(
    reaped: list[Delivery],
    counts: dict[DeliveryStatus, int],
    progress: Callable[[Event], None] | None,
) -> None:
    for row in reaped:
        counts[DeliveryStatus.SENDING] -= 1
        counts[DeliveryStatus.UNKNOWN] += 1
        if progress is not None:
            result = Result(Outcome.UNKNOWN, Scope.CONNECTION, None, row.smtp_reply)
            unknown = DeliveryStatus.UNKNOWN
            progress(Event(row.recipient, unknown, result, dict(counts), DeliveryStatus.SENDING))


def _tell(procs: Iterable[ForkProcess]) -> None:
    """A graceful stop for each worker (a second one makes it abandon its uploads)."""
    for proc in procs:
        if proc.pid is not None and proc.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)


def _worker(
    share: Share,
    job: Job,
    target: Path | str,
    durability: Durability,
    lock_wait: float,
    work: Work,
    pipe: Connection,
    parent: int,
) -> None:
    # Its own pipe's write end only: not the send lock, the parent's outbox connection, the
    # other workers' pipes (children.py).
    detach(parent, keep=[pipe.fileno()])
    batch: list[Change] = []

    def flush() -> None:
        if batch:
            pipe.send(Recorded(batch.copy()))
            batch.clear()

    def forward(event: Event) -> None:
        batch.append((event.recipient, event.previous, event.state, event.result))
        if event.state != DeliveryStatus.SENT or len(batch) >= BATCH:
            flush()
        elif len(batch) == 1:
            asyncio.get_running_loop().call_later(BATCH_DELAY, flush)

    try:
        delivered = work(share.worker, job, share.options, target, durability, lock_wait, forward)
        flush()
        if delivered.stopped:
            pipe.send(Stopped(delivered.stopped, delivered.resumes_at))
    except NewsletterError as exc:  # the outbox failed (its disk full, its connection lost)
        flush()
        fault = (exc.message, exc.hint) if isinstance(exc, DatabaseError) else None
        reason = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        pipe.send(Stopped(reason, fault=fault))
    finally:
        with contextlib.suppress(OSError):
            flush()
        pipe.close()
