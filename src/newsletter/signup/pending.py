"""At most one confirmation mail per mailbox per window (a day by default), whatever is posted:
an address in, whether a confirmation may go to it now.

The rule is counted per *mailbox*, not per address as typed: ``Ann.Lee+news@gmail.com``,
``annlee@googlemail.com`` and ``ANNLEE@gmail.com`` reach one inbox, and a bot bombing a victim
varies exactly those (a +tag: RFC 5233 subaddressing, which Gmail, Outlook, iCloud, Fastmail and
Proton deliver to the same inbox; dots: Gmail ignores them; case: every provider ignores it in
practice). The subscriber still keeps the address they typed; only the count folds them.

The decision is the rule's (`ConfirmationRule.allows`); the record of when each mailbox was last
sent one is a `ConfirmationClaims` store's, and its `claim` must be one atomic step, so that
two posts at the same instant cannot both win. On SQL that is one statement, e.g.::

    INSERT INTO confirmation_claims (mailbox, sent_at) VALUES (:mailbox, :now)
    ON CONFLICT (mailbox) DO UPDATE SET sent_at = excluded.sent_at
        WHERE confirmation_claims.sent_at <= :now - :window
    RETURNING mailbox          -- a row back: claimed; none: refused
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from newsletter.importers.subscribers import address_key

GMAIL = frozenset({"gmail.com", "googlemail.com"})
SUBADDRESS = "+"


def mailbox_key(address: str) -> str:
    """The inbox `address` reaches, as far as the address tells: the address key (ASCII,
    lower-cased), less any +tag, and for Gmail less the dots, on gmail.com. ValueError if the
    address is not valid."""
    local, _, domain = address_key(address).rpartition("@")
    base = local.split(SUBADDRESS, 1)[0] or local  # "+tag@x" alone is an address of its own
    if domain in GMAIL:
        return f"{base.replace('.', '')}@gmail.com"
    return f"{base}@{domain}"


class ConfirmationClaims(Protocol):
    """Where the last confirmation per mailbox is recorded (the outbox, later)."""

    def claim(self, mailbox: str, now: dt.datetime, window: dt.timedelta) -> bool:
        """Atomically: if nothing was claimed for `mailbox` after `now - window`, record `now`
        for it and return True; otherwise change nothing and return False."""
        ...


@dataclass(frozen=True)
class ConfirmationRule:
    """One confirmation per mailbox per `window`."""

    window: dt.timedelta = dt.timedelta(days=1)

    def allows(self, last_sent: dt.datetime | None, now: dt.datetime) -> bool:
        """Whether a confirmation may go out at `now` when the last went at `last_sent`. A last
        one in the future (a clock set back) counts as just now: it never opens the gate."""
        return last_sent is None or now - last_sent >= self.window

    def next_allowed(self, last_sent: dt.datetime) -> dt.datetime:
        return last_sent + self.window

    def claim(self, claims: ConfirmationClaims, address: str, now: dt.datetime) -> bool:
        """Claim the right to send `address` a confirmation now, through the store."""
        return claims.claim(mailbox_key(address), now, self.window)
