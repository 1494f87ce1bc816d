"""A send made ready: settings, the checked draft, a list and the command's database in; a
Prepared send (or .eml files) out.

`prepare` takes the draft the checks saw (draft.review: the issue loaded and rendered once, its
links slots when [tracking] clicks is on), checks the list and builds the message factory, so every
problem with them surfaces before the first connection. The list's recipients are its CSV (if it has
one) and its confirmed subscribers in the outbox (recipients.py). The list is read once here: its
CSV's header only (planning reads the rows, and reports the bad ones, as it streams them into the
outbox), and, for a confirmation (`Prepared.survey`), every recipient, counting who will get a
message. A staging list's test (testsend.py) gives the factory its round: each test's own
Message-IDs. `dry_run` writes what a send would upload, as .eml files. The coordinator
(coordinator.py) runs the send.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.context import CommandContext
from newsletter.database import Database
from newsletter.draft import Draft, dated_for_sending
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory, write_eml_files
from newsletter.mail.tokens import SigningKey, signing_key
from newsletter.mail.tracking import SendRendering, render_for_sending
from newsletter.models import Subscriber
from newsletter.send.job import Job
from newsletter.send.recipients import Recipients, RecipientsReport
from newsletter.send.smtp import Pool
from newsletter.send.testsend import TestDecision


@dataclass(frozen=True)
class Prepared:
    """Everything checked before the first connection, and what a confirmation shows."""

    settings: Settings
    job: Job
    sender: str
    server: str
    key: SigningKey
    # The email's tracked links (none when [tracking] clicks is off): the coordinator records
    # them before the first message goes out.
    tracked: SendRendering | None = None
    # A staging list's test: which one this run sends (testsend.py; the coordinator begins
    # it); None for a real list.
    test: TestDecision | None = None
    # The command's database (context.py), if there was one when it was prepared: the survey
    # reads through it (None: no log, so no subscribers or suppressions in it).
    database: Database | None = None

    @property
    def staging(self) -> bool:
        return self.settings.mailing_list(self.job.list_name).staging

    def survey(self) -> RecipientsReport:
        """Who will get a message (suppressed readers counted apart): every recipient read once,
        for a confirmation only."""
        return survey_list(self.settings, self.job.list_name, self.key, self.database)


def prepare(
    settings: Settings,
    draft: Draft,
    list_name: str,
    database: Database | None,
    *,
    test: TestDecision | None = None,
) -> Prepared:
    """Check the list and build the message factory from `draft`, the render the checks saw
    (draft.review): the issue file is not read again, so an edit saved since the checks ran
    does not reach the readers. Any problem raises before anything is sent. `database`: the
    command's, if there is one (read, never created here). `test`: the test of a staging list
    to send (each test's messages have Message-IDs of their own)."""
    key = signing_key(settings, allow_ephemeral=False)
    sending = draft.sending
    factory = MessageFactory(
        sending.rendered,
        settings,
        list_name,
        secret=key.secret,
        links=sending.links,
        test_round=test.round if test is not None else 1,
    )
    # Suppressed readers stay in: planning gives each a `skipped` row saying why, so the log
    # accounts for every address on the list.
    recipients = Recipients(settings, list_name, key, database)
    smtp = settings.smtp
    return Prepared(
        settings=settings,
        job=Job(draft.issue.number, list_name, recipients, factory.build, factory.message_id_of),
        sender=settings.newsletter.sender,
        server=f"{smtp.host}:{smtp.port} ({smtp.security})",
        key=key,
        tracked=sending,
        test=test,
        database=database,
    )


def survey_list(
    settings: Settings, list_name: str, key: SigningKey, database: Database | None
) -> RecipientsReport:
    """Every recipient read once: who would get a message, suppressed addresses (in the log,
    `database`, if there is one: a survey never creates it) counted apart."""
    suppressed = _suppressed(database, list_name)
    recipients = Recipients(settings, list_name, key, database, check=False)
    rows, report = recipients.read(suppressed=suppressed, database=database)
    for _ in rows:
        pass
    return report


def _suppressed(database: Database | None, list_name: str) -> frozenset[str]:
    return frozenset() if database is None else database.suppressions.addresses(list_name)


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
    list_report: RecipientsReport
    ephemeral_key: bool


def dry_run(context: CommandContext, number: int, list_name: str, out: Path) -> DryRun:
    """The same issue, recipients and suppressions as a real send, written to `out` as .eml
    files: no SMTP, and the delivery log is only read (a dry run never creates it)."""
    settings, database = context.settings, context.existing_database()
    key = signing_key(settings, allow_ephemeral=True)
    issue = load_issue(settings.issues_dir, number)
    sending = render_for_sending(
        dated_for_sending(settings, issue, context.first_sent()), settings, list_name
    )
    factory = MessageFactory(
        sending.rendered, settings, list_name, secret=key.secret, links=sending.links
    )
    rows, report = Recipients(settings, list_name, key, database).read(
        suppressed=_suppressed(database, list_name), database=database
    )
    stream = (
        Subscriber(envelope=row.envelope, name=row.name, line=row.line or None) for row in rows
    )
    written, removed = write_eml_files(factory, stream, out)
    return DryRun(written, removed, report, key.ephemeral)
