"""One send, wired: settings, an issue number and a list in; a RunReport (or .eml files) out.

`prepare` loads the issue, renders it once, checks the list's header and builds the message
factory, so every problem with them surfaces before the first connection (the rows are read,
and bad ones reported, as planning streams them into the outbox); `send` holds the (issue, list)
lock on SQLite (on PostgreSQL, workers on many machines share a send through leases) and runs
the engine in this process or in worker processes; `dry_run` writes what a send would upload.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from newsletter.draft import dated_for_sending
from newsletter.errors import DeliveryError
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory, write_eml_files
from newsletter.mail.tokens import signing_key
from newsletter.mail.tracking import SendRendering, render_for_sending
from newsletter.models import Subscriber
from newsletter.outbox import Outbox, open_outbox, outbox_exists
from newsletter.send.job import Event, Job, Options, RunReport
from newsletter.send.lease import Lease, worker_id
from newsletter.send.planning import announce, plan, recover
from newsletter.send.recipients import Recipients
from newsletter.send.smtp import Pool
from newsletter.send.testsend import TestDecision, begin
from newsletter.send.worker import deliver, event_loop_factory
from newsletter.settings import Settings
from newsletter.subscribers import ListReport


@dataclass(frozen=True)
class Prepared:
    """Everything checked before the first connection: what `send` asks the user to confirm."""

    settings: Settings
    job: Job
    list_report: ListReport  # filled as planning reads the list
    list_rows: int  # lines after the header: what the confirmation shows
    sender: str
    server: str
    # The email's tracked links (none when [tracking] clicks is off): see record_tracked_links.
    tracked: SendRendering | None = None
    # A staging list's test: which one this run sends (send/testsend.py); None for a real list.
    test: TestDecision | None = None

    @property
    def staging(self) -> bool:
        return self.settings.mailing_list(self.job.list_name).staging


def prepare(
    settings: Settings, number: int, list_name: str, test: TestDecision | None = None
) -> Prepared:
    """Load the issue, render it once, read the list and build the message factory; any
    problem raises before anything is sent. `test`: the test of a staging list to send."""
    key = signing_key(settings, allow_ephemeral=False)
    issue = dated_for_sending(settings, load_issue(settings.issues_dir, number))
    sending = render_for_sending(issue, settings, list_name)
    factory = MessageFactory(
        sending.rendered,
        settings,
        list_name,
        secret=key.secret,
        links=sending.links,
        test_round=test.round if test is not None else 1,
    )
    # The CSV (if any) and the confirmed subscribers in the outbox, less forgotten people.
    # Suppressed readers stay in: planning gives each a `skipped` row saying why, so the log
    # accounts for every address on the list.
    recipients = Recipients(settings, list_name, key)
    smtp = settings.smtp
    return Prepared(
        settings=settings,
        job=Job(
            number,
            list_name,
            recipients.stream,
            factory.build,
            factory.message_id_of,
            recipients.report,
        ),
        list_report=recipients.report,
        list_rows=recipients.rows,
        sender=settings.newsletter.sender,
        server=f"{smtp.host}:{smtp.port} ({smtp.security})",
        tracked=sending,
        test=test,
    )


def send(
    prepared: Prepared, options: Options, progress: Callable[[Event], None] | None = None
) -> RunReport:
    """Check the server and deliver, in this process or (options.processes > 1) in worker
    processes; on SQLite under the send lock for (issue, list), on PostgreSQL as one of the
    workers that share the send."""
    settings, job = prepared.settings, prepared.job
    make_pool = functools.partial(smtp_pool, settings)
    with open_outbox(settings.outbox_target) as outbox, _alone(settings, outbox, job):
        if prepared.test is not None:
            begin(prepared.test, job.issue, job.list_name, outbox)
        record_tracked_links(prepared, outbox)
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            if options.processes <= 1:
                return runner.run(_send(job, make_pool, outbox, options, progress))
            runner.run(check(make_pool(1)))
        with Lease(outbox, worker_id(), job.issue, job.list_name, options.lease) as lease:
            recovered = recover(job, outbox, lease.worker)
            announce(recovered, job, outbox, progress)
            planning = RunReport(job.issue, job.list_name, {})
            plan(job, outbox, options, lease.worker, planning)
            from newsletter.send import processes  # worker processes only: not every send

            report = processes.run(
                job, outbox, options, options.processes, make_pool, progress, lease
            )
        report.recovered[:0] = recovered
        report.planned, report.plan_seconds = planning.planned, planning.plan_seconds
        return report


def record_tracked_links(prepared: Prepared, outbox: Outbox) -> None:
    """The hook of what readers read (README): before the first message of a run goes out,
    the outbox holds the links its messages carry, by place, so `serve` redirects every
    click token to the link that message had. Nothing when [tracking] clicks is off."""
    tracked = prepared.tracked
    if tracked is None or not tracked.links:
        return
    mode = prepared.settings.tracking.clicks
    outbox.sent_links.record(prepared.job.issue, prepared.job.list_name, mode, tracked.links)


def _alone(settings: Settings, outbox: Outbox, job: Job) -> AbstractContextManager[None]:
    """SQLite: the send lock (one send per issue and list). PostgreSQL: none, the workers
    share the send."""
    if outbox.shared:
        return nullcontext()
    return send_lock(settings.state_dir, job.issue, job.list_name)


def smtp_pool(settings: Settings, size: int) -> Pool:
    return Pool(
        settings.smtp,
        password=settings.smtp_password,
        size=size,
        helo=helo_name(settings),
        root=settings.root,
    )


async def check(pool: Pool) -> None:
    """Connect once before anything is planned to go out; always closes the pool."""
    try:
        await pool.check()
    finally:
        await pool.close()


async def _send(
    job: Job,
    make_pool: Callable[[int], Pool],
    outbox: Outbox,
    options: Options,
    progress: Callable[[Event], None] | None,
) -> RunReport:
    pool = make_pool(options.concurrency)
    try:
        await pool.check()
    except BaseException:
        await pool.close()
        raise
    return await deliver(job, pool, outbox, options, progress)


def helo_name(settings: Settings) -> str:
    """EHLO names the sender's domain; asking the resolver for our FQDN can stall offline."""
    domain = settings.newsletter.sender.rpartition("@")[2].strip(" >")
    return domain.encode("idna").decode("ascii") if domain else "localhost"


@contextmanager
def send_lock(state_dir: Path, issue: int, list_name: str) -> Iterator[None]:
    """One send per (issue, list) at a time. flock is released by the kernel when the process
    dies, so a killed run never leaves a stale lock behind."""
    state_dir.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", list_name)
    path = state_dir / f"send-{issue}-{safe}.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            pid = handle.read().strip() or "?"
            raise DeliveryError(
                f"another `newsletter send` of issue {issue} to {list_name!r} is running"
                f" (pid {pid})",
                hint="Wait for it to finish, or stop it (Ctrl-C); then re-run to resume.",
            ) from None
        # The pid only tells the next run who holds the lock: a full disk must not stop this
        # one (written unbuffered, so closing the file has nothing left to fail on).
        with contextlib.suppress(OSError):
            os.ftruncate(handle.fileno(), 0)
            os.pwrite(handle.fileno(), str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class DryRun:
    written: int
    removed: int  # .eml files an earlier dry run left in the folder
    list_report: ListReport
    ephemeral_key: bool


def dry_run(settings: Settings, number: int, list_name: str, out: Path) -> DryRun:
    """The same issue, list and suppressions as a real send, written to `out` as .eml files:
    no SMTP, and the delivery log is only read (a dry run never creates it)."""
    key = signing_key(settings, allow_ephemeral=True)
    issue = dated_for_sending(settings, load_issue(settings.issues_dir, number))
    sending = render_for_sending(issue, settings, list_name)
    factory = MessageFactory(
        sending.rendered, settings, list_name, secret=key.secret, links=sending.links
    )
    suppressed: frozenset[str] = frozenset()
    if outbox_exists(settings.outbox_target):
        with open_outbox(settings.outbox_target) as outbox:
            suppressed = outbox.suppressed(list_name)
    recipients = Recipients(settings, list_name, key)
    stream = (
        Subscriber(envelope=row.envelope, name=row.name, line=row.line or None)
        for row in recipients.stream(suppressed=suppressed)
    )
    written, removed = write_eml_files(factory, stream, out)
    return DryRun(written, removed, recipients.report, key.ephemeral)
