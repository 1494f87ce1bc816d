"""The SMTP client: OutgoingMessages in, one Result per message out, through several relays.

`Pool` keeps N `Session`s (one SMTP session is strictly serial, so concurrency means several
sessions); each holds one link.Link per relay ([smtp]'s own and each [smtp.relays.NAME]),
opened on first use. A message goes through the first relay of its order (relays.py: its
route, the order written, those set aside left out). When that relay fails it before its body
went out (a session it would not open, a 421 or its own 4xx before DATA's 354, its AUTH refused,
its account stopped), the board counts it against the relay and the message goes through the
next one at once; once the 354 was accepted (the engine committed `sending`) the message never
moves: whatever follows, an `unknown` included, is that relay's, and the Result names it.

A message announced on a link behind the last body (link.py) is sent on that link; the engine's
`meanwhile` announces only a message whose first relay is the link's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from newsletter.config.settings import SmtpSettings
from newsletter.errors import TransportError
from newsletter.models import OutgoingMessage
from newsletter.send import faults
from newsletter.send.faults import OpeningError
from newsletter.send.link import Link, Meanwhile, OnAccepted
from newsletter.send.relays import Board, Relay, relays_of
from newsletter.send.replies import Result

__all__ = ["Meanwhile", "OnAccepted", "Pool", "Session"]


class Session:
    """One of the pool's N seats: a link per relay; each message through its relay."""

    def __init__(self, board: Board) -> None:
        self._board = board
        self._links = {relay.name: Link(relay) for relay in board.relays}
        self.relay = ""  # the relay of the message in its transaction, for the engine's mark

    async def send(
        self, message: OutgoingMessage, on_accepted: OnAccepted, meanwhile: Meanwhile = None
    ) -> Result:
        accepted = False

        async def accepting() -> None:
            nonlocal accepted
            accepted = True  # from here on the message is this relay's, whatever happens
            await on_accepted()

        result: Result | None = None
        fault: TransportError | None = None
        for relay in self._order(message):
            self.relay = relay.name
            link = self._links[relay.name]
            try:
                sent = await link.send(message, accepting, self._announcing(relay, meanwhile))
            except TransportError as exc:  # a setup fault: no message goes out there now
                self._board.set_aside(relay, exc.message)
                fault = exc
                continue
            result = dataclasses.replace(sent, relay=relay.name)
            if not self._board.judge(relay, result) or accepted:
                return result
        if result is None:
            assert fault is not None
            raise fault
        return result

    def _order(self, message: OutgoingMessage) -> list[Relay]:
        """The message's relays; first, the one its envelope was announced on, if any."""
        order = self._board.order(message.recipient)
        for relay in self._board.relays:
            if self._links[relay.name].holds(message):
                return [relay, *(r for r in order if r is not relay)]
        return order

    def _announcing(self, relay: Relay, meanwhile: Meanwhile) -> Meanwhile:
        """`meanwhile`, announcing on `relay`'s link only a message that goes through it."""
        if meanwhile is None:
            return None

        def announce() -> OutgoingMessage | None:
            upcoming = meanwhile()
            if upcoming is None or self._board.first(upcoming.recipient) is not relay:
                return None  # the engine sends it next all the same, on its own relay
            return upcoming

        return announce

    async def open(self) -> None:
        """The first relay that opens, tried in the order written; OpeningError (the first
        relay's) if none does. Each that does not is counted against."""
        first: OpeningError | None = None
        for relay in self._board.order(""):
            try:
                await self._links[relay.name].open()
                return
            except OpeningError as failure:
                first = first or failure
                if len(self._board.relays) > 1:
                    try:
                        self._board.judge(relay, faults.unopened(failure))
                    except TransportError as exc:
                        self._board.set_aside(relay, exc.message)
        assert first is not None
        raise first

    async def close(self, *, polite: bool = False) -> None:
        await asyncio.gather(*(link.close(polite=polite) for link in self._links.values()))


class Pool:
    """`size` sessions, each with a link to every relay in `smtp`, each opened on first use."""

    def __init__(
        self,
        smtp: SmtpSettings,
        *,
        password: SecretStr | None,
        size: int,
        helo: str = "localhost",
        root: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.smtp = smtp
        relays = relays_of(smtp, password=password, helo=helo, root=root)
        self.board = Board(relays, after=smtp.set_aside_after, aside=smtp.set_aside, clock=clock)
        self.opener = relays[0].opener
        self._all = [Session(self.board) for _ in range(size)]

    @property
    def sessions(self) -> list[Session]:
        """Every session, for a caller that keeps one task per session (the engine): a
        message announced on a session must be sent on it."""
        return list(self._all)

    def __repr__(self) -> str:
        return f"Pool({self.where}, size={len(self._all)})"

    @property
    def where(self) -> str:
        return self.opener.where

    async def check(self) -> None:
        """Open one session now, so a wrong host, certificate or password stops the run before
        any message is planned to go out (the session is the first one sent on). With several
        relays, one that opens is enough; the others are set aside."""
        try:
            await self._all[0].open()
        except OpeningError as failure:
            raise faults.check_failed(failure, self.opener.smtp) from None

    async def close(self) -> None:
        await asyncio.gather(*(session.close(polite=True) for session in self._all))
