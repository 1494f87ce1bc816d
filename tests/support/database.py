"""Test-only ways into the outbox: a list held in memory or a list file alone as what a send reads
(a real send reads send/recipients.py's), a small list planned in one go, the rows due, and one
mark or outcome committed at once (a send goes through the streaming plan and the journal)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from newsletter.database import DUE, Database, Delivery, Planned, PlanResult
from newsletter.importers.subscribers import ListReport, fold_address, read_rows
from newsletter.models import DeliveryStatus
from newsletter.send.coordinator import Interrupts, Run
from newsletter.send.job import Event, Job, Listed, Options, RunReport
from newsletter.send.lease import worker_id
from newsletter.send.smtp import Pool


@dataclass(frozen=True)
class Listing:
    """A list held in memory, read anew each time (no file, so no report)."""

    subscribers: Callable[[], Iterable[Listed]]

    def read(self) -> tuple[Iterable[Listed], ListReport | None]:
        return self.subscribers(), None


@dataclass(frozen=True)
class CsvListing:
    """A list file alone (no outbox subscribers), read anew and reported on afresh each time."""

    path: Path

    def read(self) -> tuple[Iterable[Listed], ListReport]:
        report = ListReport(self.path)
        return read_rows(self.path, report), report


def plan(
    database: Database,
    issue: int,
    list_name: str,
    recipients: Iterable[str],
    message_ids: Mapping[str, str] | None = None,
    *,
    planner: str = "",
) -> PlanResult:
    """Plan a list of plain addresses in one go: a `pending` row for every new recipient;
    waiting rows whose recipient left the list or is suppressed become `skipped`.
    `message_ids` (recipient -> Message-ID) gives each new or waiting row without one its ID."""
    ids = {fold_address(r): m for r, m in message_ids.items()} if message_ids else {}
    start = database.plans.start(issue, list_name, planner)
    keys = iter(dict.fromkeys(fold_address(r) for r in recipients))
    while batch := list(islice(keys, 5000)):
        rows = [Planned(k, k, "", ids.get(k)) for k in batch]
        database.plans.add(issue, list_name, start.generation, rows)
    return database.plans.finish(issue, list_name, start)


def due(database: Database, issue: int, list_name: str) -> list[Delivery]:
    """Rows a run would attempt (pending and deferred), oldest first."""
    return database.deliveries.rows(issue, list_name, DUE)


def mark_sending(
    database: Database, row_id: int, message_id: str | None, owner: str | None = None
) -> bool:
    """One `sending` mark, committed at once."""
    journal = database.journal(owner)
    journal.mark(row_id, message_id)
    return journal.commit() == [True]


def record(
    database: Database,
    row_id: int,
    state: DeliveryStatus,
    *,
    code: int | None = None,
    reply: str = "",
    next_attempt_at: float = 0.0,
    attempted: bool = False,
    owner: str | None = None,
) -> bool:
    """One outcome, committed at once."""
    journal = database.journal(owner)
    journal.record(
        row_id,
        state,
        code=code,
        reply=reply,
        next_attempt_at=next_attempt_at,
        attempted=attempted,
    )
    return journal.commit() == [True]


async def deliver(
    job: Job,
    pool: Pool,
    database: Database,
    options: Options,
    progress: Callable[[Event], None] | None = None,
    *,
    check: bool = False,
) -> RunReport:
    """A whole run of `job` in one process, as `newsletter send` runs it (lease, recover,
    reopen, plan, deliver, retire; with `check`, the server checked first, its session kept
    for the first message), on a thread and event loop of its own: the test's loop serves
    the SMTP server meanwhile. No signals (they are the main thread's)."""

    def whole() -> RunReport:
        run = Run(job, database, options, progress, Interrupts(signals=()), worker_id())
        with asyncio.Runner() as runner:
            if check:
                runner.run(pool.check())
            return run.steps(lambda lease, planned: runner.run(run.engine(pool, lease, planned)))

    return await asyncio.to_thread(whole)
