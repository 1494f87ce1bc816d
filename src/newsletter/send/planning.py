"""A list streamed into the outbox: a Job in, the plan's counts and the rows left in doubt out.

Before a run sends anything: the uploads a dead run left in `sending` become `unknown` (SQLite:
all of them, the send lock proves no other run is alive; PostgreSQL: only those of workers whose
lease expired), the rows the flags ask for become due again, and the list is planned, batch by
batch, so memory does not grow with the list. With several workers on one PostgreSQL outbox,
planning happens once: under the send's planning lock, a worker finding a plan made by a worker
that is still alive shares it instead of planning again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from newsletter.models import DeliveryStatus
from newsletter.outbox import Delivery, Outbox, PlanResult
from newsletter.send.job import Event, Job, Options, RunReport
from newsletter.send.reader import planned_batches
from newsletter.send.replies import Outcome, Result, Scope

S = DeliveryStatus
# Rows per batch once a list has proved long (reader.py starts with smaller ones, so the writer
# starts early): each batch is one transaction, its index inserts in key order.
BATCH = 5000


def recover(job: Job, outbox: Outbox, worker: str) -> list[Delivery]:
    """The rows a dead run left in doubt, now `unknown` (reported, resent only on request);
    `worker` is the caller, registered already."""
    if outbox.shared:
        return outbox.reap(job.issue, job.list_name)
    return outbox.recover(job.issue, job.list_name, keep=worker)


def plan(job: Job, outbox: Outbox, options: Options, worker: str, report: RunReport) -> None:
    """Reopen what the flags ask for and stream the list into the outbox; the counts and the
    time go into `report` (no counts when a live worker's plan is shared)."""
    started = time.monotonic()
    report.planned = _plan(job, outbox, options, worker)
    report.plan_seconds = time.monotonic() - started


def _plan(job: Job, outbox: Outbox, options: Options, worker: str) -> PlanResult | None:
    with outbox.plan_lock(job.issue, job.list_name):
        # What the flags ask for is done by every worker given them, shared plan or not.
        reopen = [S.UNKNOWN] if options.resend_unknown else []
        reopen += [S.FAILED] if options.retry_failed else []
        outbox.reopen(job.issue, job.list_name, reopen)
        if outbox.shared and outbox.plan_is_current(job.issue, job.list_name):
            return None
        start = outbox.start_plan(job.issue, job.list_name, worker)
        for batch in planned_batches(job, BATCH):
            outbox.add(job.issue, job.list_name, start.generation, batch)
        return outbox.finish_plan(job.issue, job.list_name, start)


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
