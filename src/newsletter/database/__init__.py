"""The project's database: a backend and the stores, one per feature, that write through it.

It is the delivery log (the "outbox" of `[outbox] url` and `outbox.sqlite3`) and everything
else the project keeps: readers, consent, clicks, schedules, bounce reports.

`open_database(target)` opens a SQLite file (a Path) or a PostgreSQL database (a URL) and hands
out a Database: the backend (backend.py; sqlite.py, postgres.py), its schema brought up to date
(schema.py), and one small store per table family, each a class that takes the backend:
`deliveries` (the rows), `plans` (the list streamed in), `leases` (workers and their claims),
`suppressions`, `bounces` (reports and the ones held for review); `journal(owner)` starts the
marks and outcomes of one worker's send (journal.py: when each becomes durable). Readers in the
database: `roster` (subscribers), `consent` (the ledger), `claims` (one confirmation per
mailbox), `forgotten` (people erased on request), `site_mail` (the worker's queue). What readers
read: `clicks`, `sent_links` (the links each tracked send carried), `send_figures`. The editor's
day: `test_sends` (a staging list's tests, one row each), `schedules` (sends booked for later).
Providers' webhook events: `webhook_events` (each id applied once), `webhook_tokens` (a
signature's token good for one request).
A store of a later feature is a class of its own over `database.backend`, composed here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Self

from newsletter.config.settings import Settings
from newsletter.database.backend import Backend, Durability, is_postgres
from newsletter.database.bounces import Bounces
from newsletter.database.claims import ConfirmationClaims
from newsletter.database.clicks import Clicks
from newsletter.database.consent import ConsentLedger
from newsletter.database.deliveries import Deliveries
from newsletter.database.enrolments import STEP_KEYS, Enrolments
from newsletter.database.forgotten import Forgotten
from newsletter.database.heartbeats import Heartbeats
from newsletter.database.journal import Commit, Journal
from newsletter.database.leases import Leases
from newsletter.database.mailqueue import SiteMailQueue
from newsletter.database.plans import Planned, PlannedRow, Plans
from newsletter.database.records import (
    DEPARTED,
    DUE,
    EDITOR_SOURCE,
    IN_DOUBT,
    UNSUBSCRIBED,
    Delivery,
    PlanResult,
    Suppression,
    Worker,
)
from newsletter.database.roster import Roster
from newsletter.database.schedules import Schedules
from newsletter.database.schema import LATEST, MIGRATIONS, Migration
from newsletter.database.sendfigures import SendFigures
from newsletter.database.sentissues import SentIssue, SentIssues
from newsletter.database.sentlinks import SentLinks
from newsletter.database.sqlite import BUSY_TIMEOUT, SqliteBackend
from newsletter.database.subjecttests import SubjectTests
from newsletter.database.suppressions import Suppressions
from newsletter.database.testsends import TestSends
from newsletter.database.webhookevents import WebhookEvents
from newsletter.database.webhooktokens import WebhookTokens
from newsletter.errors import DatabaseError
from newsletter.state.statefiles import private_folder

__all__ = [
    "DEPARTED",
    "DUE",
    "EDITOR_SOURCE",
    "IN_DOUBT",
    "LATEST",
    "MIGRATIONS",
    "STEP_KEYS",
    "UNSUBSCRIBED",
    "Backend",
    "Commit",
    "Database",
    "Delivery",
    "Durability",
    "Enrolments",
    "Journal",
    "Migration",
    "PlanResult",
    "Planned",
    "PlannedRow",
    "SentIssue",
    "Suppression",
    "Worker",
    "database_exists",
    "is_postgres",
    "open_database",
    "open_project_database",
]


class Database:
    """The delivery log at `backend.target`, as its stores."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.deliveries = Deliveries(backend)
        self.plans = Plans(backend)
        self.leases = Leases(backend)
        self.suppressions = Suppressions(backend)
        self.bounces = Bounces(backend)
        self.roster = Roster(backend)
        self.consent = ConsentLedger(backend)
        self.claims = ConfirmationClaims(backend)
        self.forgotten = Forgotten(backend)
        self.site_mail = SiteMailQueue(backend)
        self.clicks = Clicks(backend)
        self.sent_links = SentLinks(backend)
        self.sent_issues = SentIssues(backend)
        self.send_figures = SendFigures(backend)
        self.test_sends = TestSends(backend, self.deliveries, self.plans)
        self.schedules = Schedules(backend)
        self.heartbeats = Heartbeats(backend)
        self.webhook_events = WebhookEvents(backend)
        self.webhook_tokens = WebhookTokens(backend)
        self.enrolments = Enrolments(backend)
        self.subject_tests = SubjectTests(backend)

    def journal(self, owner: str | None) -> Journal:
        return Journal(self.backend, owner)

    @property
    def target(self) -> Path | str:
        return self.backend.target

    @property
    def durability(self) -> Durability:
        return self.backend.durability

    @property
    def lock_wait(self) -> float:
        return self.backend.lock_wait

    @property
    def display(self) -> str:
        """Where the outbox is, safe to print (never a password)."""
        return self.backend.display

    @property
    def shared(self) -> bool:
        """Whether several workers may share a send (PostgreSQL), leases deciding who lives."""
        return self.backend.shared

    @property
    def broken(self) -> bool:
        return self.backend.broken

    def close(self) -> None:
        self.backend.close()

    @contextmanager
    def disconnected(self) -> Iterator[None]:
        """The connection closed for the block and opened again after it: for a process that
        forks children which open the outbox themselves. A SQLite connection open across fork
        leaves the child SQLite's record of the parent's locks and of the file's shared
        memory, on descriptors that are not the child's: the child's locks would then miss
        the parent's, and two writers could write at once."""
        self.backend.close()
        try:
            yield
        finally:
            self.backend.reconnect()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.close()
            return
        # Leaving on an error (a full disk, a lost connection): that error is the one to
        # report, not closing's own failure on the same disk or connection.
        with suppress(DatabaseError):
            self.close()


def open_database(
    target: Path | str,
    *,
    durability: Durability = "process",
    migrate: bool = True,
    lock_wait: float = BUSY_TIMEOUT,
) -> Database:
    """The outbox at `target`, its schema brought up to date (unless `migrate` is False): a
    Path is a SQLite file, a `postgresql://` URL a PostgreSQL database. `lock_wait`: how long
    a SQLite write waits for another program's write lock ([outbox] lock_wait)."""
    if is_postgres(target):
        # Imported only when used: SQLite users never load psycopg.
        from newsletter.database.postgres import PostgresBackend

        return Database(PostgresBackend(str(target), durability=durability, migrate=migrate))
    backend = SqliteBackend(
        Path(target), durability=durability, migrate=migrate, lock_wait=lock_wait
    )
    return Database(backend)


def open_project_database(settings: Settings, *, migrate: bool = True) -> Database:
    """The outbox `settings` name ([outbox] url, else the state folder's SQLite file), with its
    [outbox] durability and lock_wait. The state folder holding it is made (or kept) private."""
    target = settings.database_target
    if isinstance(target, Path) and target.parent == settings.state_dir:
        private_folder(settings.state_dir)
    return open_database(
        settings.database_target,
        durability=settings.outbox.durability,
        migrate=migrate,
        lock_wait=settings.outbox.lock_wait,
    )


def database_exists(target: Path | str) -> bool:
    """Whether there is a log to read (read-only commands never create the SQLite file)."""
    return is_postgres(target) or Path(target).exists()
