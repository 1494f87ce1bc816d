"""The preference page's changes: a reader's choices in (which lists, a new address); the roster,
suppressions and consent ledger brought in line out, each step in one transaction.

The reader arrives with the unsubscribe token of a mail they got (its list and their address):
it proves the address as much as the one-click unsubscribe it already allows. The page offers
the token's list and every list that takes signups (not staging lists):

- **choices**: a list left is a suppression of the reader's own (`web`, which they may lift) and
  their row `left`; a list joined is a confirmed row (the token proves the address) and their
  own suppression lifted. A suppression by the editor or a bounce stays: such a list shows as
  not joinable.
- **a new address** is confirmed first: `request_move` runs the signup's checks on it (forgotten,
  suppressed, the mailbox's claim) and queues a change mail to it, whose link carries the old
  address; `move` then moves every list the old address is on (its rows move; the old address is
  suppressed there too, in case a CSV still names it), with a `change` event for each address.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.database.claims import ConfirmationClaims
from newsletter.database.consent import ConsentLedger
from newsletter.database.mailqueue import MailKind, SiteMailQueue
from newsletter.database.roster import Roster, Status
from newsletter.importers.subscribers import fold_address
from newsletter.mail.tokens import LinkTarget
from newsletter.signup.intake import READER_SOURCES, Intake, Request, What
from newsletter.signup.pending import mailbox_key


@dataclass(frozen=True)
class Choice:
    """One list on the page: whether the reader gets it, and whether they may change that."""

    list_name: str
    label: str
    on: bool
    locked: bool  # the editor or a bounce stopped mail to it: not the reader's to lift


def offered(settings: Settings, list_name: str) -> list[str]:
    """The lists the page shows: the token's, then those that take signups (staging apart)."""
    names = [list_name]
    names += [
        name
        for name in settings.signup_lists
        if name != list_name and not settings.lists[name].staging
    ]
    return names


def choices(settings: Settings, database: Database, list_name: str, key: str) -> list[Choice]:
    roster = database.roster
    suppressions = database.suppressions
    shown = []
    for name in offered(settings, list_name):
        chosen = settings.lists[name]
        found = suppressions.get(name, key)
        member = roster.get(name, key)
        on = found is None and (
            name == list_name or (member is not None and member.status is Status.CONFIRMED)
        )
        locked = found is not None and found.source not in READER_SOURCES
        shown.append(Choice(name, chosen.name or settings.newsletter.name, on, locked))
    return shown


def current(intake: Intake, database: Database, list_name: str, key: str) -> list[Choice]:
    """The choices the page shows: for an address erased on request, every list off and
    locked (nothing about them is kept, and nothing they post is)."""
    if intake.forgotten(database.backend, key):
        label = intake.settings.newsletter.name
        return [
            Choice(name, intake.settings.lists[name].name or label, False, True)
            for name in offered(intake.settings, list_name)
        ]
    return choices(intake.settings, database, list_name, key)


def choose(
    intake: Intake,
    database: Database,
    list_name: str,
    address: str,
    wanted: set[str],
    request: Request,
) -> list[Choice]:
    """Bring the reader's lists in line with `wanted` (names among the offered ones); the
    choices as they are now."""
    settings = intake.settings
    backend = database.backend
    key = address
    with backend.transaction():
        if intake.forgotten(backend, key):
            return current(intake, database, list_name, key)
        roster, ledger = Roster(backend), ConsentLedger(backend)
        suppressions = database.suppressions
        for choice in choices(settings, database, list_name, key):
            name = choice.list_name
            if choice.locked or (name in wanted) == choice.on:
                continue
            if choice.on:
                suppressions.add(name, key, "web")
                roster.leave(name, key)
                ledger.record(intake.event(name, key, "unsubscribe", request))
            else:
                suppressions.remove(name, key, sources=READER_SOURCES)
                if name != list_name:
                    roster.add(name, address, key, mailbox_key(address), "", "preferences")
                ledger.record(intake.event(name, key, "change", request, joined=name))
        return choices(settings, database, list_name, key)


def request_move(
    intake: Intake,
    database: Database,
    list_name: str,
    old_key: str,
    new_address: str,
    request: Request,
) -> What:
    """Queue the change mail to `new_address` (checked as a signup's address is); What says
    whether it went (the page answers alike)."""
    backend = database.backend
    new_key = fold_address(new_address)
    with backend.transaction():
        # The old address too: its change mail would keep it (`detail`) after its erasure.
        if intake.forgotten(backend, new_key) or intake.forgotten(backend, old_key):
            return What.FORGOTTEN
        found = database.suppressions.get(list_name, new_key)
        if found is not None and found.source not in READER_SOURCES:
            return What.SUPPRESSED
        if not intake.rule.claim(ConfirmationClaims(backend), new_address, intake.now()):
            return What.RECENT
        SiteMailQueue(backend).queue(
            MailKind.CHANGE,
            list_name,
            new_address,
            new_key,
            nonce=secrets.token_urlsafe(12),
            detail=old_key,
        )
    return What.QUEUED


def move(
    intake: Intake, database: Database, target: LinkTarget, request: Request
) -> list[str] | None:
    """The old address's lists moved to the new one the link proved; the lists moved (empty:
    the old address is on none). None when the link is used up: moved once already, or its
    change mail is gone (either address erased since)."""
    backend = database.backend
    old_key, new_key = target.detail, target.address
    moved: list[str] = []
    with backend.transaction():
        if not SiteMailQueue(backend).use_change(new_key, old_key, target.nonce):
            return None
        if intake.forgotten(backend, new_key) or intake.forgotten(backend, old_key):
            return None
        if old_key == new_key:
            return moved
        roster, ledger = Roster(backend), ConsentLedger(backend)
        suppressions = database.suppressions
        lists = [m.list for m in roster.of(old_key) if m.status is Status.CONFIRMED]
        if target.list_name not in lists and not suppressions.contains(target.list_name, old_key):
            lists.append(target.list_name)  # a CSV's reader: the token's list
        mailbox = mailbox_key(new_key)
        for name in lists:
            if name not in intake.settings.lists:
                continue
            roster.move(name, old_key, new_key, new_key, mailbox)
            suppressions.add(name, old_key, "web")
            suppressions.remove(name, new_key, sources=READER_SOURCES)
            ledger.record(intake.event(name, new_key, "change", request, moved_from=old_key))
            ledger.record(intake.event(name, old_key, "change", request, moved_to=new_key))
            moved.append(name)
    return moved
