"""The steps before anything goes out: a Job and the outbox in; the rows a dead run left in doubt,
the rows reopened and the plan out, each returned as a value (the coordinator runs them in turn).

`recover` turns the uploads a dead run left in `sending` into `unknown` (SQLite: all of them,
the send lock proves no other run is alive; PostgreSQL: only those of workers whose lease
expired). `reopen` makes due again what the flags ask for. `plan` streams the list into the
outbox batch by batch, read in a child process (reader.py), so memory does not grow with the
list, keeping the worker's lease between batches; with several workers on one PostgreSQL
outbox, a worker that finds a plan made by a worker still alive shares it instead.
"""

from __future__ import annotations

from collections.abc import Callable

from newsletter.database import Database, Delivery, PlanResult
from newsletter.importers.subscribers import ListReport
from newsletter.models import DeliveryStatus
from newsletter.send.job import Job, Options
from newsletter.send.reader import ListStream

S = DeliveryStatus
# Rows per batch once a list has proved long (reader.py starts with smaller ones, so the writer
# starts early): each batch is one transaction, its index inserts in key order.
BATCH = 5000


def recover(job: Job, database: Database, worker: str) -> list[Delivery]:
    """The rows a dead run left in doubt, now `unknown` (reported, resent only on request);
    `worker` is the caller, registered already."""
    if database.shared:
        return database.leases.reap(job.issue, job.list_name)
    return database.deliveries.recover(job.issue, job.list_name, keep=worker)


def reopen(job: Job, database: Database, options: Options) -> int:
    """`unknown` rows (--resend-unknown) and `failed` ones (--retry-failed) due again; how
    many. Done by every worker given the flags, shared plan or not."""
    states = [S.UNKNOWN] if options.resend_unknown else []
    states += [S.FAILED] if options.retry_failed else []
    return database.deliveries.reopen(job.issue, job.list_name, states)


def plan(
    job: Job, database: Database, worker: str, keep: Callable[[], None]
) -> tuple[PlanResult | None, ListReport | None]:
    """The list streamed into the outbox: the plan's counts and what reading the list found;
    (None, None) when a live worker's plan is shared. `keep` runs between batches (it keeps
    the lease). Under the send's planning lock (the caller's)."""
    if database.shared and database.plans.is_current(job.issue, job.list_name):
        return None, None
    start = database.plans.start(job.issue, job.list_name, worker)
    stream = ListStream(job, BATCH)
    for batch in stream:
        database.plans.add(job.issue, job.list_name, start.generation, batch)
        keep()
    return database.plans.finish(job.issue, job.list_name, start), stream.report
