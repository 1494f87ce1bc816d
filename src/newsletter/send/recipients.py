"""Who a list's send goes to: the list's settings in; its recipients out, as one stream: the CSV's
rows (when the list has a CSV), then its confirmed subscribers in the outbox that the CSV does
not name, less the people erased on request.

Suppressed readers stay in the stream: planning gives each a `skipped` row saying why (a dry
run, which plans nothing, leaves them out and counts them). Duplicates are the CSV's own
(reported with their lines, as `newsletter subscribers` shows them); a subscriber the CSV names
too is sent once, as the CSV names them, and counted as `also_listed`. Nothing held grows with
the list: the outbox is read a page at a time, and only when the list has subscribers there are
the CSV's keys kept, by seen.SeenKeys.

`Recipients.read` is called where planning reads the list, which is a forked child
(send/reader.py): its stream opens its own connection to the outbox there, as a connection
belongs to the process that opened it. In the command's own process (a confirmation's survey, a
dry run) the caller hands it the command's database (context.py) to read through instead.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.database import Database, open_database
from newsletter.database.roster import Status
from newsletter.errors import display_path
from newsletter.importers.seen import SeenKeys
from newsletter.importers.subscribers import (
    ListReport,
    ListRow,
    check_list_header,
    fold_address,
    read_rows,
)
from newsletter.mail.tokens import SigningKey
from newsletter.signup.forgetting import forgotten_test

NO_CSV = Path("no CSV")


@dataclass
class RecipientsReport(ListReport):
    """The list's report (the CSV's rows) and the outbox's part of it."""

    subscribers: int = 0  # confirmed subscribers in the outbox, streamed
    also_listed: int = 0  # confirmed subscribers the CSV names too: sent once
    forgotten: int = 0  # rows and subscribers left out: erased on request

    @property
    def recipients(self) -> int:
        """Who gets a message: the CSV's valid rows and the subscribers only the outbox has."""
        return self.valid + self.subscribers

    def counts(self) -> dict[str, int]:
        extra = {
            "subscribers": self.subscribers,
            "also in the CSV": self.also_listed,
            "forgotten": self.forgotten,
        }
        return {**super().counts(), **{k: n for k, n in extra.items() if n}}


class Recipients:
    """One list's recipients, read anew (and reported on afresh) by each `read`: the
    send.job.ListSource a send reads."""

    def __init__(
        self,
        settings: Settings,
        list_name: str,
        key: SigningKey,
        database: Database | None,
        *,
        check: bool = True,
    ) -> None:
        """`database`: the command's, read now for the list's subscribers and the people
        forgotten (None: no log yet, so none of either)."""
        chosen = settings.mailing_list(list_name)
        self.list_name = list_name
        self.target = settings.database_target
        self.csv = settings.resolve(chosen.path) if chosen.path is not None else None
        self.path = Path(display_path(self.csv)) if self.csv else NO_CSV
        if check and self.csv is not None:
            check_list_header(self.path)
        self.members = 0
        self._forgotten: Callable[[str], bool] = lambda _: False
        if database is not None:
            self.members = database.roster.counts(list_name)[Status.CONFIRMED]
            self._forgotten = forgotten_test(database.backend, key)

    def read(
        self, *, suppressed: Container[str] = frozenset(), database: Database | None = None
    ) -> tuple[Iterator[ListRow], RecipientsReport]:
        """Every recipient once, and the report that reading them fills; `suppressed` keys are
        counted and left out (a dry run, a confirmation's count). `database`: the command's,
        when read in its process; None: the stream opens its own (the reader child)."""
        report = RecipientsReport(self.path)
        return self._stream(report, suppressed, database), report

    def _stream(
        self, report: RecipientsReport, suppressed: Container[str], database: Database | None
    ) -> Iterator[ListRow]:
        forgotten = self._forgotten
        with SeenKeys() as listed:
            if self.csv is not None:
                for row in read_rows(report.path, report, suppressed=suppressed):
                    key = fold_address(row.envelope)
                    if forgotten(key):
                        report.valid -= 1
                        report.forgotten += 1
                        continue
                    if self.members:
                        listed.add(key, row.line)
                    yield row
            if not self.members:
                return
            # A forked child (the list's reader) opens a connection of its own: its parent's
            # is not its to use (Database.disconnected says why).
            opened = (
                nullcontext(database)
                if database is not None
                else open_database(self.target, migrate=False)
            )
            with opened as reading:
                for key, address, name in reading.roster.confirmed(self.list_name):
                    if self.csv is not None and listed.add(key, 0) is not None:
                        report.also_listed += 1
                    elif forgotten(key):
                        report.forgotten += 1
                    elif key in suppressed:
                        report.suppressed += 1
                    else:
                        report.subscribers += 1
                        yield ListRow(address, name, 0)
