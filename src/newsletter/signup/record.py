"""What the outbox keeps about people: an address in, their whole record out (GDPR Art. 15: the
lists they are on and how they got there, every consent event, the site's mail to them, their
suppressions, every issue sent to them, their welcome sequences); and a list in, its subscribers
with their consent columns out (`newsletter subscribers export`, which `import --format csv`
reads back).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from newsletter.database import Database
from newsletter.database.consent import ConsentEvent, ConsentLedger
from newsletter.database.forgotten import Forgotten
from newsletter.database.mailqueue import SiteMail, SiteMailQueue
from newsletter.database.roster import PAGE, Membership, Roster, Status
from newsletter.mail.tokens import SigningKey
from newsletter.signup.forgetting import digest, hashing_key

EXPORT_COLUMNS = (
    "email",
    "name",
    "status",
    "subscribed_at",
    "subscribed_ip",
    "confirmed_at",
    "confirmed_ip",
    "source",
    "updated_at",
)
_SUBSCRIBED_EVENTS = ("signup", "import", "add")


@dataclass(frozen=True)
class PersonRecord:
    address: str  # the address key asked about
    forgotten_at: str | None  # erased on request then: nothing else is kept
    memberships: list[Membership]
    consent: list[ConsentEvent]
    site_mail: list[SiteMail]
    suppressions: list[tuple[str, str, str]]  # (list, source, since)
    deliveries: list[tuple[int, str, str, str | None, str]]  # (issue, list, state, sent, updated)
    # Welcome sequences: (sequence, list, last step had, joined at Unix time).
    enrolments: list[tuple[str, str, int, float]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.memberships
            or self.consent
            or self.site_mail
            or self.suppressions
            or self.deliveries
            or self.enrolments
        )

    def as_json(self) -> dict[str, Any]:
        """The record as one JSON object (what the person is given, Art. 15(3))."""
        return {
            "address": self.address,
            "forgotten_at": self.forgotten_at,
            "lists": [
                {k: v for k, v in asdict(m).items() if k not in ("id", "nonce", "mailbox_key")}
                for m in self.memberships
            ],
            "consent": [asdict(e) for e in self.consent],
            "site_mail": [
                {
                    "kind": m.kind.value,
                    "list": m.list,
                    "state": m.state.value,
                    "created_at": m.created_at,
                    "sent_at": m.sent_at,
                }
                for m in self.site_mail
            ],
            "suppressions": [
                {"list": li, "source": so, "since": at} for li, so, at in self.suppressions
            ],
            "deliveries": [
                {"issue": i, "list": li, "state": st, "sent_at": sent, "updated_at": up}
                for i, li, st, sent, up in self.deliveries
            ],
            "sequences": [
                {"sequence": q, "list": li, "last_step": st, "joined_at": at}
                for q, li, st, at in self.enrolments
            ],
        }


def person_record(database: Database, key: SigningKey, address_key: str) -> PersonRecord:
    backend = database.backend
    forgotten = Forgotten(backend)
    hashing = hashing_key(backend, key) if forgotten.count() else None
    when = forgotten.when(digest(hashing, address_key)) if hashing is not None else None
    return PersonRecord(
        address_key,
        when,
        Roster(backend).of(address_key),
        ConsentLedger(backend).of(address_key),
        SiteMailQueue(backend).of(address_key),
        database.suppressions.of_address(address_key),
        database.deliveries.of_recipient(address_key),
        database.enrolments.of(address_key),
    )


def export_rows(database: Database, list_name: str) -> Iterator[tuple[str, ...]]:
    """The list's subscribers in the outbox as EXPORT_COLUMNS rows, in address order: the
    confirmed ones as `subscribed`, those who left (or are suppressed) as `unsubscribed`.
    Pending signups (never confirmed) are not exported: nobody consented yet."""
    backend = database.backend
    ledger = ConsentLedger(backend)
    suppressions = database.suppressions.addresses(list_name)

    def rows(page: list[Membership]) -> Iterator[tuple[str, ...]]:
        events = ledger.latest(
            list_name, [m.address_key for m in page], (*_SUBSCRIBED_EVENTS, "confirm")
        )
        for m in page:
            found = [events.get((m.address_key, e)) for e in _SUBSCRIBED_EVENTS]
            joined = next((e for e in found if e is not None), None)
            confirmed = events.get((m.address_key, "confirm"))
            left = m.status is Status.LEFT or m.address_key in suppressions
            yield (
                m.address,
                m.name,
                "unsubscribed" if left else "subscribed",
                *_consent_columns(m, joined, confirmed),
                m.source,
                m.updated_at,
            )

    page: list[Membership] = []
    for member in Roster(backend).members(list_name):
        if member.status is Status.PENDING:
            continue
        page.append(member)
        if len(page) >= PAGE:
            yield from rows(page)
            page = []
    yield from rows(page)


def _consent_columns(
    member: Membership, joined: ConsentEvent | None, confirmed: ConsentEvent | None
) -> tuple[str, str, str, str]:
    """subscribed_at, subscribed_ip, confirmed_at, confirmed_ip: from the ledger (an import's
    from the tool's own columns it kept), else from the row."""
    sub_at: object = joined.at if joined else member.created_at
    sub_ip: object = joined.ip if joined else ""
    conf_at: object = confirmed.at if confirmed else member.confirmed_at
    conf_ip: object = confirmed.ip if confirmed else ""
    if joined is not None and joined.event == "import":
        kept = joined.evidence
        sub_at, sub_ip = kept.get("subscribed_at") or member.created_at, kept.get("subscribed_ip")
        if confirmed is None:
            conf_at, conf_ip = kept.get("confirmed_at"), kept.get("confirmed_ip")
    return str(sub_at or ""), str(sub_ip or ""), str(conf_at or ""), str(conf_ip or "")
