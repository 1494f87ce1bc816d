"""One worker's run of a send: a job, an SMTP pool and an outbox in, the run's report out.

`deliver` registers the worker's lease, recovers what a dead run left in doubt and plans the list
(planning.py; skipped by a worker process whose parent planned), then runs the engine
(engine.py) until the send is done, stopped, or signalled: the first SIGINT/SIGTERM lets the
messages in flight finish and be recorded, a second abandons them (`unknown` if their upload had
begun).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from newsletter.outbox import Outbox
from newsletter.send.engine import Engine
from newsletter.send.job import Event, Job, Options, RunReport
from newsletter.send.lease import Lease, worker_id
from newsletter.send.planning import announce, plan, recover
from newsletter.send.smtp import Pool

# Seconds of planning after which the session the check opened is not trusted any more.
IDLE_SESSION = 10.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed: it roughly halves the event loop's share of each message."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def deliver(
    job: Job,
    pool: Pool,
    outbox: Outbox,
    options: Options,
    progress: Callable[[Event], None] | None = None,
    *,
    signals: tuple[signal.Signals, ...] = SIGNALS,
    planned: bool = False,
    worker: str | None = None,
) -> RunReport:
    """Run one send as one worker to the end, a stop, or a signal: the first lets in-flight
    messages finish and be recorded; a second abandons them (recorded `unknown` if their upload
    had begun). `planned` skips recovery and planning (a worker process of a run its parent
    planned)."""
    name = worker or worker_id()
    with Lease(outbox, name, job.issue, job.list_name, options.lease) as lease:
        engine = Engine(job, pool, outbox, options, progress, lease=lease)
        if not planned:
            engine.report.recovered = recover(job, outbox, lease.worker)
            announce(engine.report.recovered, job, outbox, progress)
            plan(job, outbox, options, lease.worker, engine.report)
            # The session the check opened idled through a long plan (a million rows), and
            # relays drop idle sessions (smtp-sink after 100 s): sending opens fresh ones.
            if engine.report.plan_seconds > IDLE_SESSION:
                await pool.close()
        return await _run(engine, signals)


async def _run(engine: Engine, signals: tuple[signal.Signals, ...]) -> RunReport:
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
        return await engine.run()
    except asyncio.CancelledError:
        if not abandoned:
            raise
        job = engine.job
        engine.report.counts = engine.outbox.counts(job.issue, job.list_name)
        return engine.report
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
