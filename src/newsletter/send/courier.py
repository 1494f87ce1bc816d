"""The site's own mail delivered: due mails in the outbox's queue in; each sent through the SMTP
pool and its outcome recorded once, out. One `deliver_due` is one look at the queue.

The steps, each a named call in order:

1. **claim** up to a batch of due mails (outbox/mailqueue.py: committed before any connection);
2. **build** each one's message (mail/sitemail.py), its link a fresh token that expires after
   `[signup] confirm_expiry`;
3. **send** it through the pool, whose `on_accepted` marks it `sending` (committed) once the
   server answered DATA with 354 and before the body goes out; a mark refused (the claim ran
   out while this worker was paused: another may have it) ends the transaction with no body;
4. **record** the outcome as the reply table maps it (send/faults.py, send/replies.py): sent,
   rejected, failed, unknown (the upload was cut: never sent again); a deferral or a lost
   connection before the 354 makes it due again after a backoff, failed after
   `[worker] max_attempts`.

At most once, whatever kills the worker: a mail it claimed and never started goes back to the
queue, a mail in `sending` becomes `unknown` and stays so. A setup fault (a certificate, a
password: TransportError) puts the claimed mails back and waits; so does an outcome the
database could not take, which is recorded again at the next look, never sent again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from newsletter.config.settings import Settings
from newsletter.database.backend import Backend
from newsletter.database.mailqueue import MailKind, MailState, SiteMail, SiteMailQueue
from newsletter.errors import NewsletterError, TransportError
from newsletter.links import confirm_url, move_url
from newsletter.mail.sitemail import SiteMessages
from newsletter.mail.tokens import LinkTarget, Purpose, sign_link
from newsletter.models import OutgoingMessage
from newsletter.send.pacing import RetryPolicy
from newsletter.send.replies import Outcome, Result, Scope
from newsletter.send.smtp import Pool, Session

# A deferred confirmation or welcome is tried again after 15-30 s, then twice as long each time,
# up to an hour: the send's policy (pacing.RetryPolicy) with the site mail's own figures. Half of
# each wait is kept: one reader's mail is not tried again at once against a server that deferred.
RETRY = RetryPolicy(base=30.0, cap=3600.0, spread=0.5)
SETUP_PAUSE = 60.0  # seconds to wait after the server could not be used at all
Log = Callable[[str], None]

_STATES = {
    Outcome.SENT: MailState.SENT,
    Outcome.REJECTED: MailState.REJECTED,
    Outcome.FAILED: MailState.FAILED,
    Outcome.UNKNOWN: MailState.UNKNOWN,
}


class LostClaimError(Exception):
    """The mail is no longer this worker's: send no body."""


@dataclass
class MailTally:
    """What the looks so far did, by outcome."""

    counts: dict[MailState, int] = field(default_factory=dict)

    def add(self, state: MailState) -> None:
        self.counts[state] = self.counts.get(state, 0) + 1


class Courier:
    """The site's mail for one worker (`owner`), through `pool`."""

    def __init__(
        self,
        backend: Backend,
        settings: Settings,
        secret: bytes,
        pool: Pool,
        owner: str,
        *,
        log: Log = lambda _: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.queue = SiteMailQueue(backend)
        self.settings = settings
        self.messages = SiteMessages(settings, secret)
        self._secret = secret
        self.pool = pool
        self._free: asyncio.Queue[Session] | None = None  # the pool's idle sessions
        self.owner = owner
        self._log = log
        self._clock = clock
        self.tally = MailTally()
        self._unrecorded: list[tuple[int, MailState, int | None, str, float]] = []

    # -- the steps -----------------------------------------------------------------------------

    def claim(self) -> list[SiteMail]:
        config = self.settings.worker
        return self.queue.claim(self.owner, config.concurrency * 4, config.lease)

    def build(self, mail: SiteMail) -> tuple[str, bytes]:
        """(Message-ID, the message's bytes) for `mail`, its link valid from now."""
        base = self.settings.newsletter.base_url
        expires = int(self._clock() + self.settings.signup.confirm_expiry * 3600)
        if mail.kind is MailKind.CONFIRM:
            target = LinkTarget(Purpose.CONFIRM, mail.list, mail.address_key, mail.nonce, expires)
            link = confirm_url(base, sign_link(self._secret, target))
        elif mail.kind is MailKind.CHANGE:
            target = LinkTarget(
                Purpose.CHANGE, mail.list, mail.address_key, mail.nonce, expires, mail.detail
            )
            link = move_url(base, sign_link(self._secret, target))
        else:
            link = ""
        data = self.messages.build(mail.id, mail.kind, mail.list, mail.recipient, link)
        return self.messages.message_id(mail.id), data

    async def send(self, mail: SiteMail) -> Result:
        """The mail through the pool; LostClaimError when the claim ran out before its body."""
        message_id, data = self.build(mail)
        message = OutgoingMessage(
            message_id=message_id, sender=self.messages.sender, recipient=mail.recipient, data=data
        )

        async def accepted() -> None:
            if not self.queue.mark_sending(mail.id, self.owner):
                raise LostClaimError(f"site mail {mail.id} is no longer this worker's")

        # Mails go out together (deliver_due gathers them), each on the first free session.
        if self._free is None:
            self._free = asyncio.Queue()
            for session in self.pool.sessions:
                self._free.put_nowait(session)
        session = await self._free.get()
        try:
            return await session.send(message, accepted)
        finally:
            self._free.put_nowait(session)

    def record(self, mail: SiteMail, result: Result) -> MailState:
        """The outcome, once (kept to be recorded again if the database cannot take it)."""
        state = _STATES.get(result.outcome, MailState.DUE)
        retry_in = 0.0
        if state is MailState.DUE:
            if mail.attempts + 1 >= self.settings.worker.max_attempts:
                state = MailState.FAILED
            else:
                retry_in = RETRY.delay(mail.attempts + 1)
        self._unrecorded.append((mail.id, state, result.code, result.reply, retry_in))
        self._flush()
        return state

    # -- one look at the queue ----------------------------------------------------------------

    async def deliver_due(self) -> float:
        """Send what is due now; seconds until the next look is worth it (0: more is due)."""
        self._flush()
        poll = self.settings.worker.poll
        due = self.queue.next_due()  # a read: no write lock taken while nothing is due
        if due is None or due > 0:
            return poll if due is None else min(poll, due)
        mails = self.claim()
        if not mails:
            return poll
        results = await asyncio.gather(*(self._deliver(m) for m in mails), return_exceptions=True)
        pause = 0.0
        for outcome in results:
            if isinstance(outcome, TransportError):
                pause = SETUP_PAUSE
            elif isinstance(outcome, BaseException):
                raise outcome
        if pause:
            self.queue.release(self.owner)
            return pause
        return 0.0 if len(mails) >= self.settings.worker.concurrency * 4 else 0.05

    async def _deliver(self, mail: SiteMail) -> None:
        try:
            result = await self.send(mail)
        except LostClaimError as exc:
            self._log(f"site mail {mail.id}: {exc}; not sent")
            return
        except TransportError as exc:
            self._log(f"site mail {mail.id}: the SMTP server cannot be used: {exc.message}")
            raise
        except NewsletterError as exc:  # its template, a header: this mail's own fault
            result = Result(Outcome.FAILED, Scope.RECIPIENT, None, exc.message)
        state = self.record(mail, result)
        self.tally.add(state)
        detail = f" ({result.code} {result.reply})" if state is not MailState.SENT else ""
        self._log(f"site mail {mail.id}: {mail.kind} to {mail.recipient}: {state}{detail}")

    def _flush(self) -> None:
        """Record what is waiting to be recorded; an DatabaseError leaves the rest for later."""
        while self._unrecorded:
            mail_id, state, code, reply, retry_in = self._unrecorded[0]
            self.queue.record(mail_id, self.owner, state, code, reply, retry_in=retry_in)
            self._unrecorded.pop(0)

    def rebind(self, backend: Backend) -> None:
        """Go on over a new connection (the old one was lost)."""
        self.queue = SiteMailQueue(backend)

    def renew(self) -> None:
        self.queue.renew(self.owner, self.settings.worker.lease)

    def stop(self) -> None:
        """Leave: what was claimed and not started goes back to the queue."""
        self._flush()
        self.queue.release(self.owner)
