"""Another tool's export into the outbox: an Export (importers/) and a list in; its subscribers
(with their consent), its suppressions and every refused row out, in one transaction.

Per outcome:

- **Imported**: a confirmed subscriber (their consent is the tool's: its times and IPs become
  the row's and an `import` event's, with the tool's own consent columns, the file and the line,
  as evidence; every IP, in the columns too, kept as `[privacy]` keeps a signup's). A reader
  who left this list here is not brought back (refused, with when), nor is anyone erased on
  request; a suppressed address is kept a subscriber and stays suppressed.
- **ImportedSuppression**: never mailed on the list (source `imported`), with an `unsubscribe` event
  saying what the tool said (unsubscribed, cleaned, email disabled, ...), unless the editor had
  suppressed it already.
- **Refused**: counted and handed to `on_refused` with its file, line and reason.

All of it or nothing: a file found damaged halfway (ExportFileError from the Export), or the
database failing, leaves the outbox as it was. With `dry_run` the same import runs, decision
for decision, and its transaction is rolled back: what it counts is what the import would do
(a dry run that decided apart once promised suppressions the import then skipped).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.database.backend import Backend
from newsletter.database.consent import ConsentEvent, ConsentLedger
from newsletter.database.roster import Roster, Status
from newsletter.errors import Problem
from newsletter.importers import Export, Imported, ImportedSuppression, ImportReport, Refused
from newsletter.importers.subscribers import fold_address
from newsletter.importers.values import parse_ip
from newsletter.mail.tokens import SigningKey
from newsletter.signup.forgetting import forgotten_test
from newsletter.signup.intake import consent_ip
from newsletter.signup.pending import mailbox_key

IMPORTED = "imported"  # the suppressions' source


@dataclass
class Imports:
    """What an import did beyond what its Export's report counts."""

    report: ImportReport
    added: int = 0  # new subscribers on the list
    updated: int = 0  # already on it: kept, their name filled in if it had none
    suppressed: int = 0  # suppressions recorded (others were the editor's already)
    refused: list[Problem] = field(default_factory=list)  # rows refused here (left, erased)


class _DryRun(Exception):  # noqa: N818 (not an error: how a dry run undoes its transaction)
    """Raised at the end of a dry run's transaction, so that all it wrote is rolled back."""


@contextmanager
def _transaction(backend: Backend, *, roll_back: bool) -> Iterator[None]:
    """One transaction, committed, or with `roll_back` undone once its block is through."""
    try:
        with backend.transaction():
            yield
            if roll_back:
                raise _DryRun
    except _DryRun:
        pass


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def _columns(
    cells: Iterable[tuple[str, str]], kept_ip: Callable[[str | None], str]
) -> dict[str, str]:
    """The tool's consent columns as evidence, every cell that is an IP address (OPTIN_IP,
    CONFIRM_IP, ip_address) kept as `[privacy]` keeps a signup's, or left out when it keeps
    none."""
    kept = {}
    for name, value in cells:
        try:
            ip = parse_ip(value)
        except ValueError:
            ip = None
        if ip is None:
            kept[name] = value
        elif stored := kept_ip(ip):
            kept[name] = stored
    return kept


def import_export(
    database: Database,
    export: Export,
    list_name: str,
    key: SigningKey,
    *,
    settings: Settings,
    on_refused: Callable[[Problem], None] = lambda _: None,
    dry_run: bool = False,
) -> Imports:
    """Every row of `export` into `list_name` (see the module docstring)."""
    backend = database.backend
    kept_ip = consent_ip(settings, key.secret)
    done = Imports(export.report)
    forgotten = forgotten_test(backend, key)
    roster, ledger = Roster(backend), ConsentLedger(backend)
    suppressions = database.suppressions

    def refuse(problem: Problem) -> None:
        done.refused.append(problem)
        on_refused(problem)

    with _transaction(backend, roll_back=dry_run):
        for outcome in export:
            if isinstance(outcome, Refused):
                on_refused(outcome.problem)
                continue
            origin = (
                outcome.origin
                if isinstance(outcome, ImportedSuppression)
                else outcome.consent.origin
            )
            if isinstance(outcome, Imported):
                envelope = outcome.subscriber.envelope
                address_key = fold_address(envelope)
                if forgotten(address_key):
                    refuse(
                        Problem(
                            origin.file,
                            origin.line,
                            "",
                            "this person was erased on request;"
                            " not imported (`newsletter subscribers forget --undo` first, if"
                            " they asked to come back)",
                        )
                    )
                    continue
                member = roster.get(list_name, address_key)
                if member is not None and member.status is Status.LEFT:
                    refuse(
                        Problem(
                            origin.file,
                            origin.line,
                            "",
                            f"left {list_name!r} here on {member.left_at}; not imported"
                            " (`newsletter subscribers add` brings them back)",
                        )
                    )
                    continue
                consent = outcome.consent
                before = roster.add(
                    list_name,
                    envelope,
                    address_key,
                    mailbox_key(envelope),
                    outcome.subscriber.name,
                    IMPORTED,
                    created_at=_iso(consent.subscribed_at),
                    confirmed_at=_iso(consent.confirmed_at or consent.subscribed_at),
                    rejoin=False,
                )
                done.added += before is None
                done.updated += before is not None
                ledger.record(
                    ConsentEvent(
                        list_name,
                        address_key,
                        "import",
                        at=_iso(consent.confirmed_at or consent.subscribed_at) or "",
                        ip=kept_ip(consent.confirmed_ip or consent.subscribed_ip),
                        source=f"{origin.tool}:{origin}",
                        evidence={
                            "tool": origin.tool,
                            "file": origin.file,
                            "line": origin.line,
                            "subscribed_at": _iso(consent.subscribed_at),
                            "subscribed_ip": kept_ip(consent.subscribed_ip) or None,
                            "confirmed_at": _iso(consent.confirmed_at),
                            "confirmed_ip": kept_ip(consent.confirmed_ip) or None,
                            "columns": _columns(consent.evidence, kept_ip),
                        },
                    )
                )
            else:
                if forgotten(outcome.address):
                    continue  # their hash keeps them from every list already
                if suppressions.add(list_name, outcome.address, IMPORTED):
                    done.suppressed += 1
                ledger.record(
                    ConsentEvent(
                        list_name,
                        outcome.address,
                        "unsubscribe",
                        at=_iso(outcome.at) or "",
                        source=f"{origin.tool}:{origin}",
                        evidence={"reason": outcome.reason, "detail": outcome.detail},
                    )
                )
    return done
