"""One send split over worker processes: a planned run in, the same events and report out.

A single Python process tops out at one core, and on loopback-fast servers building, recording
and uploading messages is CPU-bound. With `processes = N` the parent plans the run as usual, then
forks N workers; each is a worker of the send like one on another machine (its own lease, its
own claims from the outbox, its share of the rate), with its share of the connections, its own
event loop, SMTP pool and outbox connection, and streams one event per recorded row back to the
parent, which keeps the counts and the display.

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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkProcess
from pathlib import Path
from types import FrameType

from newsletter.errors import NewsletterError
from newsletter.models import DeliveryStatus
from newsletter.outbox import Outbox, open_outbox
from newsletter.send.children import detach
from newsletter.send.job import Event, Job, Options, RunReport
from newsletter.send.lease import Lease
from newsletter.send.planning import announce
from newsletter.send.replies import Result
from newsletter.send.smtp import Pool
from newsletter.send.worker import deliver, event_loop_factory

MakePool = Callable[[int], Pool]
_BATCH = 100
_BATCH_DELAY = 0.1


@dataclass(frozen=True)
class _Share:
    index: int
    worker: str
    options: Options


def split(options: Options, processes: int, parent: str) -> list[_Share]:
    """A fair part of the connections to each worker; the rates are the run's (each engine
    takes its part of them from the number of live workers)."""
    processes = max(1, min(processes, options.concurrency))
    shares = []
    for k in range(processes):
        connections = options.concurrency // processes + (k < options.concurrency % processes)
        part = options.model_copy(update={"concurrency": connections})
        shares.append(_Share(k, f"{parent}/{k}", part))
    return shares


def run(
    job: Job,
    outbox: Outbox,
    options: Options,
    processes: int,
    make_pool: MakePool,
    progress: Callable[[Event], None] | None,
    lease: Lease,
) -> RunReport:
    """Deliver a send already planned in `outbox` with `processes` forked workers; the parent
    keeps `lease` (its planning) renewed meanwhile."""
    report = RunReport(job.issue, job.list_name, outbox.counts(job.issue, job.list_name))
    counts = dict(report.counts)
    shares = split(options, processes, lease.worker)
    context = multiprocessing.get_context("fork")
    parent = os.getpid()
    workers: dict[Connection, ForkProcess] = {}
    with outbox.disconnected():  # each worker opens its own connection, none inherited
        for share in shares:
            receive, send = context.Pipe(duplex=False)
            proc = context.Process(
                target=_worker,
                args=(share, job, outbox.target, make_pool, send, parent),
                name=f"newsletter-send-{share.index}",
                daemon=True,
            )
            proc.start()
            send.close()
            workers[receive] = proc

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not report.stopped:
            report.stopped = f"stopped by {signal.Signals(signum).name}"
        _tell(workers.values())

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
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
                kind = message[0]
                if kind == "events":
                    for recipient, before, state, result in message[1]:
                        counts[before] -= 1
                        counts[state] += 1
                        report.this_run[state] += 1
                        if progress is not None:
                            progress(Event(recipient, state, result, counts, before))
                elif kind == "stopped" and not report.stopped:
                    report.stopped = message[1]
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
    if crashed and not report.stopped:
        report.stopped = f"a worker process died (exit code {crashed[0].exitcode})"
    # Uploads a dead worker left in `sending` are in doubt now, not at the next run (nor when
    # its lease expires: the parent saw it die).
    dead = [s.worker for s, p in zip(shares, workers.values(), strict=True) if p in crashed]
    report.recovered = outbox.reap(job.issue, job.list_name, dead=dead)
    announce(report.recovered, job, outbox, progress)
    report.counts = outbox.counts(job.issue, job.list_name)
    report.seconds = time.monotonic() - started
    return report


def _tell(procs: Iterable[ForkProcess]) -> None:
    """A graceful stop for each worker (a second one makes it abandon its uploads)."""
    for proc in procs:
        if proc.pid is not None and proc.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)


def _worker(
    share: _Share,
    job: Job,
    database: Path | str,
    make_pool: MakePool,
    pipe: Connection,
    parent: int,
) -> None:
    # Its own pipe's write end only: not the send lock, the parent's outbox connection, the
    # other workers' pipes (children.py).
    detach(parent, keep=[pipe.fileno()])
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    # Events go to the parent in batches rather than a pickle and a pipe write per message. A
    # batch leaves when it holds 100, after 0.1 s, or at once when it carries something other
    # than `sent` (a line the parent prints).
    batch: list[tuple[str, DeliveryStatus, DeliveryStatus, Result | None]] = []

    def flush() -> None:
        if batch:
            pipe.send(("events", batch.copy()))
            batch.clear()

    def forward(event: Event) -> None:
        batch.append((event.recipient, event.previous, event.state, event.result))
        if event.state != DeliveryStatus.SENT or len(batch) >= _BATCH:
            flush()
        elif len(batch) == 1:
            asyncio.get_running_loop().call_later(_BATCH_DELAY, flush)

    try:
        with (
            open_outbox(database) as outbox,
            asyncio.Runner(loop_factory=event_loop_factory()) as r,
        ):
            report = r.run(_deliver(share, job, outbox, make_pool, forward))
        flush()
        if report.stopped:
            pipe.send(("stopped", report.stopped))
    except NewsletterError as exc:  # the outbox failed (its disk full, its connection lost)
        flush()
        pipe.send(("stopped", f"{exc.message} ({exc.hint})" if exc.hint else exc.message))
    finally:
        with contextlib.suppress(OSError):
            flush()
        pipe.close()


async def _deliver(
    share: _Share,
    job: Job,
    outbox: Outbox,
    make_pool: MakePool,
    forward: Callable[[Event], None],
) -> RunReport:
    pool = make_pool(share.options.concurrency)
    return await deliver(
        job,
        pool,
        outbox,
        share.options,
        forward,
        signals=(signal.SIGTERM,),
        planned=True,
        worker=share.worker,
    )
