"""One command's context: the settings in; the project's database, opened once when first needed
and closed when the command ends, out.

A command (`newsletter send`, `check`, a `Project` method, a scheduled send's process) used to
open the database in each step that read it: the dating of the draft, the test decision, the
list's counts, the confirmation's survey, the subject test and the run, six connections for one
send. The steps now take the one this context opened (or only what they need of it), so a command
opens its database at most once, and a read-only command that finds no log creates none.

A connection belongs to the process that opened it: a forked child (the list's reader, the
send's worker processes) and a process of its own (a scheduled send) open their own, never this
one. The checked draft is not kept here: the gate's verdict carries it (gate.SendVerdict.draft),
and the send takes it from there, one place for it.
"""

from __future__ import annotations

import datetime as dt
from contextlib import suppress
from types import TracebackType
from typing import Self

from newsletter.config.settings import Settings
from newsletter.database import Database, database_exists, open_project_database
from newsletter.draft import sent_dates
from newsletter.errors import DatabaseError, NewsletterError

__all__ = ["CommandContext"]


class CommandContext:
    """The settings of one command and its one connection to the project's database."""

    def __init__(self, settings: Settings, *, migrate: bool = True) -> None:
        self.settings = settings
        # False for `outbox migrate` and `outbox info` (and `doctor`): they look at the schema
        # as it is, so opening must not bring it up to date first.
        self._migrate = migrate
        self._database: Database | None = None

    @property
    def database(self) -> Database:
        """The project's database, opened (created, and migrated unless the context says not)
        on first use."""
        if self._database is not None and self._database.broken:
            # The server dropped the connection (PostgreSQL): this command's next step opens
            # it anew rather than fail on a dead one.
            with suppress(DatabaseError):
                self.close()
        if self._database is None:
            self._database = open_project_database(self.settings, migrate=self._migrate)
        return self._database

    def existing_database(self) -> Database | None:
        """The database if there is one to read, else None: a read-only step (a check, a test
        decision, a count) never creates the SQLite file."""
        if self._database is None and not database_exists(self.settings.database_target):
            return None
        return self.database

    def first_sent(self) -> dict[int, dt.date]:
        """The day each issue first went to a subscriber list (draft.sent_dates); none when
        there is no log yet, or when it is out of reach (a PostgreSQL server the editor's
        machine cannot see): the draft is then dated as if sent now, and a send stops at the
        log anyway."""
        try:
            database = self.existing_database()
            return {} if database is None else sent_dates(self.settings, database=database)
        except NewsletterError:
            return {}

    def close(self) -> None:
        database, self._database = self._database, None
        if database is not None:
            database.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        database, self._database = self._database, None
        if database is not None:
            # The Database's own exit: on an error, that error is reported, not closing's.
            database.__exit__(et, ev, tb)
