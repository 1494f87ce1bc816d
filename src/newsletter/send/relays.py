"""Several relays: [smtp] and its [smtp.relays.NAME] tables in; for each recipient, the relays to
try in order out, and which of them are set aside (unreachable, refusing) and until when.

The order for a recipient: the relay its domain is routed through (a relay's `domains`) first,
then every relay as written, [smtp]'s own first. A relay set aside is left out of every order
while another is usable; when all are set aside, the first of the order is tried anyway (so a
lone relay is always tried, as before there were several). What counts against a relay, in a
row (a message it takes resets the count):

    a session it would not open (refused, unreachable, 421, greeting or EHLO refused),
    a connection lost before DATA's 354, its own 4xx to MAIL, 454       -> a strike;
    `set_aside_after` strikes                                           -> aside for `set_aside`
    a setup fault (AUTH refused, a certificate), its account stopped
    (550 5.4.5 daily quota, the sender refused)                         -> aside at once

Which message may move to the next relay is smtp.Session's rule: only one whose body never went
out (no 354 accepted), so a row in doubt on one relay is never sent through another. Each
process keeps its own board: with several worker processes, each finds a dead relay itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from newsletter.config.settings import SmtpSettings
from newsletter.send.opening import Opener
from newsletter.send.replies import Outcome, Result, Scope

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Relay:
    """One relay: its name, the settings its sessions open with, and the domains routed to it."""

    name: str
    smtp: SmtpSettings
    opener: Opener
    domains: frozenset[str] = frozenset()
    strikes: int = 0
    aside_until: float = 0.0
    why: str = ""  # why it was last set aside
    carried: int = field(default=0)  # messages it took in this process


def relays_of(
    smtp: SmtpSettings, *, password: SecretStr | None, helo: str, root: Path | None
) -> list[Relay]:
    """[smtp]'s own relay, then each [smtp.relays.NAME] as written. A relay whose username has
    no password (its variable unset) is a TransportError now, before anything is sent."""
    first = smtp.relay(smtp.name)
    relays = [Relay(smtp.name, first, Opener(first, password=password, helo=helo, root=root))]
    for name, table in smtp.relays.items():
        settings = smtp.relay(name)
        opener = Opener(
            settings,
            password=table.password,
            helo=helo,
            root=root,
            variable=table.password_env or "password_env",
            table=f"[smtp.relays.{name}]",
        )
        relays.append(Relay(name, settings, opener, frozenset(table.domains)))
    return relays


class Board:
    """The relays, their routes and their standing in this process."""

    def __init__(
        self,
        relays: Sequence[Relay],
        *,
        after: int,
        aside: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.relays = list(relays)
        self._after = after
        self._aside = aside
        self._clock = clock
        self._routes = {d: r for r in self.relays for d in r.domains}

    def order(self, recipient: str) -> list[Relay]:
        """The relays to try for `recipient`, best first: its route's, then the others as
        written, those set aside left out (all set aside: the first alone)."""
        domain = recipient.rpartition("@")[2].lower().rstrip(".")
        routed = self._routes.get(domain)
        ordered = [routed, *(r for r in self.relays if r is not routed)] if routed else self.relays
        now = self._clock()
        usable = [r for r in ordered if r.aside_until <= now]
        return usable or [ordered[0]]

    def first(self, recipient: str) -> Relay:
        return self.order(recipient)[0]

    def judge(self, relay: Relay, result: Result) -> bool:
        """Count `result` for or against `relay`: True if it was the relay's failure, not the
        message's (a message whose body never went out may then go through the next)."""
        if result.outcome == Outcome.SENT:
            relay.strikes = 0
            relay.carried += 1
            return False
        if result.outcome == Outcome.STOPPED:
            self.set_aside(relay, result.describe())
            return True
        if (result.outcome == Outcome.RETRY and result.scope == Scope.CONNECTION) or (
            result.outcome == Outcome.THROTTLED and result.scope == Scope.ACCOUNT
        ):
            relay.strikes += 1
            if relay.strikes >= self._after:
                self.set_aside(relay, f"{relay.strikes} failures in a row: {result.describe()}")
            return True
        return False

    def set_aside(self, relay: Relay, why: str) -> None:
        """Leave `relay` out of every order for the configured while."""
        relay.aside_until = self._clock() + self._aside
        relay.strikes = 0
        relay.why = why
        if len(self.relays) > 1:
            log.warning("relay %s set aside for %g s: %s", relay.name, self._aside, why)

    def aside(self) -> dict[str, str]:
        """The relays set aside now, and why."""
        now = self._clock()
        return {r.name: r.why for r in self.relays if r.aside_until > now}
