"""A signup that passed every defence in; one transaction out. And a confirmation link's target
in; the subscriber confirmed out.

The endpoints run the defences in this order, each its own step: the client's address
(web/site/clientip.py), the rate limits (limits.py), the size limit (web/site/guard.py), the form
(form.py; a honeypot is answered as accepted), the proof of work (challenge.py), the domain
(domains.py); then `Intake.enrol`, one transaction:

1. an address erased on request (forgetting.py), one confirmed on the list already, or one the
   editor or a bounce suppressed gets nothing;
2. the claim of the mailbox (pending.py): at most one confirmation per mailbox per window,
   whatever is posted, from however many places;
3. the subscriber's row (`pending`, with the nonce its link will carry), the consent event
   (`signup`: when, the address as `[privacy]` keeps it, the user agent, the form, the consent
   text's hash and version) and the confirmation mail, queued for `newsletter worker`.

Every way out of it is answered alike by the endpoints (no enumeration): `What` is for the log
and the tests. `Intake.confirm` confirms the row the link names (its nonce must match: a link
from before a re-signup or an erasure confirms nothing), records the `confirm` event, lifts the
reader's own unsubscribe from that list (the link proves they want it), starts them on the
list's welcome sequences (sequences/ files naming it; the worker sends the steps), and queues
the welcome mail when `[signup] welcome` is on. A link pressed again after the reader
unsubscribed changes nothing (the later wish stands), and neither does one for an address the
editor or a bounce stopped: each says so, never "subscribed".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from newsletter.clicks.events import ip_key, stored_ip
from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.database.backend import Backend
from newsletter.database.claims import ConfirmationClaims
from newsletter.database.consent import ConsentEvent, ConsentLedger
from newsletter.database.forgotten import Forgotten
from newsletter.database.mailqueue import MailKind, SiteMailQueue
from newsletter.database.roster import Roster, Status
from newsletter.i18n import PAGES, strings_for
from newsletter.importers.subscribers import fold_address
from newsletter.issues.sequencefiles import FOLDER, joining
from newsletter.mail.tokens import LinkTarget, SigningKey
from newsletter.signup.forgetting import digest, hashing_key
from newsletter.signup.form import Signup
from newsletter.signup.pending import ConfirmationRule, mailbox_key

# Suppressions a reader may lift (their own unsubscribe); the editor's and a bounce's they may not.
READER_SOURCES = ("one-click", "web")
MAX_AGENT = 300


class What(StrEnum):
    """What a signup did; the visitor is told the same in every case."""

    QUEUED = "queued"  # a confirmation is on its way
    CONFIRMED = "already-confirmed"  # on the list already: nothing sent
    RECENT = "claimed-recently"  # a confirmation went to this mailbox within the window
    SUPPRESSED = "suppressed"  # the editor or a bounce stopped mail to it
    FORGOTTEN = "forgotten"  # erased on request: never mailed again


class Confirmation(StrEnum):
    CONFIRMED = "confirmed"
    ALREADY = "already-confirmed"
    STALE = "stale"  # no pending row for this link (a newer link, a departure, an erasure)
    UNSUBSCRIBED = "unsubscribed"  # confirmed once, unsubscribed since: that stands
    SUPPRESSED = "suppressed"  # the editor or a bounce stopped mail to it: nothing confirmed


@dataclass(frozen=True)
class Request:
    """What a request says about who made it, as it came (privacy is applied when kept)."""

    ip: str | None
    user_agent: str
    source: str  # the page or endpoint: "/signup", "/api/signup", "/preferences", ...


@dataclass(frozen=True)
class ConsentText:
    text: str
    hash: str
    version: str


def consent_text(settings: Settings) -> ConsentText:
    """The words the form shows the reader as what they agree to: `[signup] consent_text`, else
    the page's own in the newsletter's language; its SHA-256 and version go into the ledger."""
    name = settings.newsletter.name
    text = settings.signup.consent_text or strings_for(PAGES, settings.newsletter.language)[
        "signup_consent"
    ].replace("{name}", name)
    digest_hex = hashlib.sha256(text.encode()).hexdigest()
    return ConsentText(text, digest_hex, settings.signup.consent_version)


def consent_ip(settings: Settings, secret: bytes) -> Callable[[str | None], str]:
    """The one rule for a client's address in the consent ledger, whoever brings it (a signup,
    a link followed, another tool's export): `[privacy] consent_ip`, else `[privacy] ip`;
    "none" keeps nothing, "keep" the address, the others as click events keep it."""
    privacy = settings.privacy
    mode = privacy.consent_ip or privacy.ip
    keyed = ip_key(secret)

    def kept(ip: str | None) -> str:
        if not ip or mode == "none":
            return ""
        if mode == "keep":
            return ip[:64]
        return stored_ip(ip, mode, key=keyed)

    return kept


class Intake:
    """The signup transaction and the confirmation, for one project and secret."""

    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        *,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self.key = key
        self.rule = ConfirmationRule(dt.timedelta(hours=settings.signup.confirmation_window))
        self.consent = consent_text(settings)
        self._clock = clock
        self._hashing: bytes | None = None
        self._kept_ip = consent_ip(settings, key.secret)

    def now(self) -> dt.datetime:
        return self._clock()

    def event(
        self, list_name: str, key: str, event: str, request: Request, **evidence: object
    ) -> ConsentEvent:
        """A consent event about `request`, its address kept as `[privacy]` says."""
        return ConsentEvent(
            list_name,
            key,
            event,
            ip=self.kept_ip(request.ip),
            user_agent="".join(c for c in request.user_agent[:MAX_AGENT] if c.isprintable()),
            source=request.source,
            text_hash=self.consent.hash,
            text_version=self.consent.version,
            evidence=evidence,
        )

    def kept_ip(self, ip: str | None) -> str:
        return self._kept_ip(ip)

    def note(
        self, database: Database, list_name: str, key: str, event: str, request: Request
    ) -> None:
        """One more event of a change made elsewhere (an unsubscribe through its link)."""
        database.consent.record(self.event(list_name, key, event, request))

    def forgotten(self, backend: Backend, key: str) -> bool:
        if self._hashing is None:
            self._hashing = hashing_key(backend, self.key)
            if self._hashing is None:
                return False  # nobody was forgotten yet
        return Forgotten(backend).contains(digest(self._hashing, key))

    def enrol(self, database: Database, signup: Signup, request: Request) -> What:
        """The signup's transaction (see the module docstring)."""
        backend = database.backend
        list_name, address = signup.list_name, signup.address
        key = fold_address(address)
        with backend.transaction():
            if self.forgotten(backend, key):
                return What.FORGOTTEN
            roster = Roster(backend)
            member = roster.get(list_name, key)
            if member is not None and member.status is Status.CONFIRMED:
                return What.CONFIRMED
            found = database.suppressions.get(list_name, key)
            if found is not None and found.source not in READER_SOURCES:
                return What.SUPPRESSED
            if not self.rule.claim(ConfirmationClaims(backend), address, self.now()):
                return What.RECENT
            signed = roster.sign_up(
                list_name, address, key, mailbox_key(address), secrets.token_urlsafe(12), "signup"
            )
            ConsentLedger(backend).record(
                self.event(list_name, key, "signup", request, text=self.consent.text)
            )
            SiteMailQueue(backend).queue(
                MailKind.CONFIRM, list_name, address, key, nonce=signed.membership.nonce
            )
        return What.QUEUED

    def confirm(self, database: Database, target: LinkTarget, request: Request) -> Confirmation:
        """The link's subscriber confirmed (see the module docstring)."""
        backend = database.backend
        list_name, key = target.list_name, target.address
        with backend.transaction():
            if self.forgotten(backend, key):
                return Confirmation.STALE
            roster = Roster(backend)
            before = roster.get(list_name, key)
            stopped = database.suppressions.get(list_name, key)
            on_list = before is not None and before.status is not Status.LEFT
            if on_list and stopped is not None and stopped.source not in READER_SOURCES:
                # A link cannot lift the editor's or a bounce's stop, and a reader nothing will
                # reach is not told "subscribed": nothing changes.
                return Confirmation.SUPPRESSED
            member = roster.confirm(list_name, key, target.nonce)
            if before is None or member is None:
                return Confirmation.STALE
            if before.status is Status.CONFIRMED:
                # Pressed again after an unsubscribe: the later wish stands (the unsubscribe
                # page's own button undoes it).
                return Confirmation.ALREADY if stopped is None else Confirmation.UNSUBSCRIBED
            ConsentLedger(backend).record(self.event(list_name, key, "confirm", request))
            database.suppressions.remove(list_name, key, sources=READER_SOURCES)
            # A new reader starts the list's welcome sequences (the worker sends their steps).
            sequences = joining(self.settings.resolve(Path(FOLDER)), list_name)
            database.enrolments.join(list_name, key, sequences, self.now().timestamp())
            if self.settings.signup.welcome:
                SiteMailQueue(backend).queue(MailKind.WELCOME, list_name, member.address, key)
        return Confirmation.CONFIRMED
