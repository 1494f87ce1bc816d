"""A send made ready: settings, an issue number and a list in; a Prepared send (or .eml files) out.

`prepare` loads the issue, renders it once, checks the list and builds the message factory, so
every problem with them surfaces before the first connection. The list is read once here: its
header only (planning reads the rows, and reports the bad ones, as it streams them into the
outbox), or, for a confirmation, every row, counting who will get a message. `dry_run` writes
what a send would upload, as .eml files. The coordinator (coordinator.py) runs the send.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from newsletter.draft import dated_for_sending
from newsletter.errors import display_path
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory, write_eml_files
from newsletter.mail.tokens import signing_key
from newsletter.outbox import open_project_outbox, outbox_exists
from newsletter.render import render_issue
from newsletter.send.job import Job, Listed
from newsletter.send.smtp import Pool
from newsletter.settings import Settings
from newsletter.subscribers import ListReport, check_list_header, read_rows, read_subscribers


@dataclass(frozen=True)
class CsvRoster:
    """A list file, read anew (and reported on afresh) each time."""

    path: Path

    def read(self) -> tuple[Iterable[Listed], ListReport]:
        # Suppressed readers stay in: planning gives each a `skipped` row saying why, so the
        # log accounts for every address on the list.
        report = ListReport(self.path)
        return read_rows(self.path, report), report


@dataclass(frozen=True)
class Prepared:
    """Everything checked before the first connection, and what a confirmation shows."""

    settings: Settings
    job: Job
    sender: str
    server: str
    # Who will get a message (suppressed addresses counted apart): read for a confirmation
    # only, None otherwise.
    recipients: ListReport | None = None

    @property
    def staging(self) -> bool:
        return self.settings.mailing_list(self.job.list_name).staging


def prepare(settings: Settings, number: int, list_name: str, *, survey: bool = False) -> Prepared:
    """Load the issue, render it once, check the list and build the message factory; any
    problem raises before anything is sent. `survey` reads the whole list, counting who will
    get a message (for a confirmation); otherwise only its header is read."""
    mailing_list = settings.mailing_list(list_name)
    key = signing_key(settings, allow_ephemeral=False)
    issue = dated_for_sending(settings, load_issue(settings.issues_dir, number))
    rendered = render_issue(issue, settings)
    factory = MessageFactory(rendered, settings, list_name, secret=key.secret)
    path = settings.resolve(mailing_list.path)
    recipients = survey_list(settings, list_name, path) if survey else None
    if recipients is None:
        check_list_header(path)
    smtp = settings.smtp
    return Prepared(
        settings=settings,
        job=Job(number, list_name, CsvRoster(path), factory.build, factory.message_id_of),
        sender=settings.newsletter.sender,
        server=f"{smtp.host}:{smtp.port} ({smtp.security})",
        recipients=recipients,
    )


def survey_list(settings: Settings, list_name: str, path: Path) -> ListReport:
    """Every row read once: who would get a message, suppressed addresses (in the log, if
    there is one: a survey never creates it) counted apart."""
    suppressed: frozenset[str] = frozenset()
    if outbox_exists(settings.outbox_target):
        with open_project_outbox(settings) as outbox:
            suppressed = outbox.suppressions.addresses(list_name)
    report = ListReport(path)
    for _ in read_rows(path, report, suppressed=suppressed):
        pass
    return report


def smtp_pool(settings: Settings, size: int) -> Pool:
    return Pool(
        settings.smtp,
        password=settings.smtp_password,
        size=size,
        helo=helo_name(settings),
        root=settings.root,
    )


def helo_name(settings: Settings) -> str:
    """EHLO names the sender's domain; asking the resolver for our FQDN can stall offline."""
    domain = settings.newsletter.sender.rpartition("@")[2].strip(" >")
    return domain.encode("idna").decode("ascii") if domain else "localhost"


@dataclass(frozen=True)
class DryRun:
    written: int
    removed: int  # .eml files an earlier dry run left in the folder
    list_report: ListReport
    ephemeral_key: bool


def dry_run(settings: Settings, number: int, list_name: str, out: Path) -> DryRun:
    """The same issue, list and suppressions as a real send, written to `out` as .eml files:
    no SMTP, and the delivery log is only read (a dry run never creates it)."""
    mailing_list = settings.mailing_list(list_name)
    key = signing_key(settings, allow_ephemeral=True)
    issue = dated_for_sending(settings, load_issue(settings.issues_dir, number))
    rendered = render_issue(issue, settings)
    factory = MessageFactory(rendered, settings, list_name, secret=key.secret)
    suppressed: frozenset[str] = frozenset()
    if outbox_exists(settings.outbox_target):
        with open_project_outbox(settings) as outbox:
            suppressed = outbox.suppressions.addresses(list_name)
    report = ListReport(Path(display_path(settings.resolve(mailing_list.path))))
    stream = read_subscribers(report.path, report, suppressed=suppressed)
    written, removed = write_eml_files(factory, stream, out)
    return DryRun(written, removed, report, key.ephemeral)
