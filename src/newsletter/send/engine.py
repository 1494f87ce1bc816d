"""The deliver step in one process: claimed rows and a message builder in, committed outcomes
and the step's value (Delivered) out.

N sessions take rows claimed from the outbox a batch at a time (supply.py: the next claim goes
out before the queue runs dry; rows suppressed since the plan are skipped), through one token
bucket per second and one per hour (this worker's share of the run's rates), past recipient
domains that throttled us and rest (pacing.py: their rows go back, due when the domain is); as a
body goes out, its session takes the next row, builds it and (with PIPELINING) announces it.
Every `sending` mark and outcome goes through the commit step (commit.py): a body waits for its
mark's commit, and outcomes join the next commit. A deferred row goes back to the outbox with
its backoff, claimed again when due, up to max_attempts in this run. faults.Breaker ends the
run after K connection failures in a row, as do destinations that all keep throttling us;
`stop` (a signal, a quota, the bounce rates) lets the messages in flight finish and be recorded.

Nothing here grows with the list: the queue holds one and a half claimed batches at most. The
engine never builds MIME or speaks SMTP itself: the job's `build(subscriber, message_id,
row_id)` makes the bytes and smtp.Pool's sessions carry them.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from newsletter.bounces.policy import Policy, RateGuard
from newsletter.database import UNSUBSCRIBED, Database, Delivery
from newsletter.errors import DatabaseError, TransportError
from newsletter.models import DeliveryStatus, OutgoingMessage, Subscriber
from newsletter.send.commit import GroupCommit
from newsletter.send.faults import Breaker
from newsletter.send.job import Delivered, Event, Job, Options
from newsletter.send.lease import LEASE_LOST, Lease, LeaseLostError
from newsletter.send.pacing import Pacer, RetryPolicy
from newsletter.send.replies import Outcome, Result, Scope
from newsletter.send.smtp import Pool, Session
from newsletter.send.supply import Order, Supply
from newsletter.send.warmup import warmup_for

S = DeliveryStatus
# Rows a claim takes: about a second of sending, so an unsubscribe is honoured within seconds
# and a dead worker strands few rows until its lease expires (the next claim goes out at half
# of it: a worker holds one and a half at most).
CLAIM = 200


class Ahead(NamedTuple):
    """The row a session sends next, taken while its last body went out: paced already, and
    its message built (None if that failed: the attempt builds it again and records why)."""

    row: Delivery
    message: OutgoingMessage | None


class Engine:
    def __init__(
        self,
        job: Job,
        pool: Pool,
        database: Database,
        options: Options,
        progress: Callable[[Event], None] | None = None,
        *,
        lease: Lease,
    ) -> None:
        self.job = job
        self.pool = pool
        self.database = database
        self.options = options
        self.progress = progress
        self.lease = lease
        self.worker = lease.worker
        self.pace = Pacer(options, warmup_for(database, options, job.issue, job.list_name))
        self.commit = GroupCommit(database.journal(self.worker), self._faulted)
        self._this_run: Counter[DeliveryStatus] = Counter()
        self._reaped: list[Delivery] = []
        self._stopped = ""
        resting = self.pace.destinations.resting_domains  # their rows are not claimed meanwhile
        self.supply = Supply(
            database.leases,
            Order(job.issue, job.list_name, self.worker, options.max_attempts, resting),
            batch=max(2 * options.concurrency, min(CLAIM, int(2 * options.rate) or CLAIM)),
            skipped=lambda row: self._record(row, S.SKIPPED, None, reply=UNSUBSCRIBED),
            on_fault=self._faulted,
            running=lambda: not self._stopping,
        )
        self._in_flight = 0
        self._breaker = Breaker(options.breaker_threshold)
        self._stopping, self._started, self._sent = False, 0.0, 0
        self._counts: dict[DeliveryStatus, int] = {}
        self._fault: DatabaseError | None = None  # a failed commit or renewal, raised by run()
        self._policy = Policy(database, options.bounces)
        self._rates = RateGuard(database, options.bounces, job.issue, job.list_name)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self, reason: str) -> None:
        """Finish what is in flight, start nothing new."""
        if not self._stopping:
            self._stopping, self._stopped = True, reason

    def delivered(self) -> Delivered:
        """The step's value so far (all of it once `run` has returned or was cancelled)."""
        return Delivered(
            this_run=dict(self._this_run),
            reaped=tuple(self._reaped),
            stopped=self._stopped,
            seconds=time.monotonic() - self._started if self._started else 0.0,
        )

    # -- the run ------------------------------------------------------------------------------

    async def run(self) -> Delivered:
        job = self.job
        self._counts = self.database.deliveries.counts(job.issue, job.list_name)
        self._started = time.monotonic()
        self._share()
        keeper = asyncio.create_task(self._keep_lease())
        sessions = [asyncio.create_task(self._work(session)) for session in self.pool.sessions]
        try:
            await asyncio.gather(*sessions)
        except DatabaseError as exc:  # the first fault the run met names the cause
            self._fault = self._fault or exc
        finally:
            for task in [*sessions, keeper]:
                task.cancel()
            self.supply.close()  # the claim on its way: its rows this worker's, left unsent
            self.commit.flush()  # what the last turns recorded
            await self.pool.close()
        if self._fault is not None:
            raise self._fault
        return self.delivered()

    async def _work(self, session: Session) -> None:
        """One session's loop. A row taken ahead and left unsent when the run stops stays
        claimed until the lease is retired, which frees it for the next run."""
        ahead: Ahead | None = None
        while not self._stopping:
            row = ahead.row if ahead is not None else await self._next()
            if row is None:
                return
            if ahead is None and (due := self.pace.destinations.resting(row.recipient)):
                self._release(row, due)  # its domain rests: the row waits in the outbox
                continue
            self._in_flight += 1
            try:
                ahead = await self._attempt(session, row, ahead)
            finally:
                self._in_flight -= 1

    async def _next(self) -> Delivery | None:
        """The next claimed row; None when the run is over (or stopping)."""
        while not self._stopping:
            if (row := self.supply.take()) is not None:
                return row
            if await self.supply.refill():
                continue
            if self._in_flight or self.commit.busy:  # an outcome may bring a row back
                await asyncio.sleep(0.02)
                continue
            wait = self._idle_wait()
            if wait is None:
                return None
            await asyncio.sleep(wait)
        return None

    def _idle_wait(self) -> float | None:
        """Nothing to claim now: how long to wait before looking again, or None if the run is
        over. Deferred rows wait for their backoff; rows other workers hold wait for them to
        finish or for their lease to expire (then they come back here)."""
        job, leases, rests = self.job, self.database.leases, self.pace.destinations
        skip, tries = rests.resting_domains(), self.options.max_attempts
        due = leases.next_due(job.issue, job.list_name, max_tries=tries, skip=skip)
        if stuck := rests.stuck_before(due, skip):
            self.stop(f"every destination still to send to keeps throttling us: {stuck}")
        elif (due := rests.next_due(due, skip)) is not None:
            return min(max(due - time.time(), 0.01), 0.5)
        if leases.held_by_others(job.issue, job.list_name, self.worker):
            self._reap()
            return 0.5
        return None

    async def _keep_lease(self) -> None:
        try:
            while self.lease.renew():
                self._reap()
                self._share()
                await asyncio.sleep(self.lease.interval)
        except DatabaseError as exc:  # raised by run(), as a failed commit would have been
            self._faulted(exc)
            return
        self.stop(LEASE_LOST)

    def _faulted(self, exc: DatabaseError) -> None:
        """The log failed under the run (a commit, a renewal): run() raises the first one."""
        self._fault = self._fault or exc
        self.stop(exc.message)

    def _reap(self) -> None:
        """Another worker's expired lease: its uploads in flight are `unknown` now."""
        for row in self.lease.reap():
            self._reaped.append(row)
            self._counts = self.database.deliveries.counts(self.job.issue, self.job.list_name)
            if self.progress:
                result = Result(Outcome.UNKNOWN, Scope.CONNECTION, None, row.smtp_reply)
                event = Event(row.recipient, S.UNKNOWN, result, dict(self._counts), S.SENDING)
                self.progress(event)

    def _share(self) -> None:
        """This worker's part of the run's rates: the rate is the whole run's."""
        if self.pace.share(self.lease.sharing()) > 1:  # the others' outcomes, for the display
            self._counts = self.database.deliveries.counts(self.job.issue, self.job.list_name)

    async def _attempt(self, session: Session, row: Delivery, ahead: Ahead | None) -> Ahead | None:
        """Send `row` on `session` (`ahead`: taken, paced and built while the last body went
        out); the row to send next if one was taken ahead meanwhile."""
        if ahead is None:
            if spent := await self.pace.take():  # the warm-up's cap for today
                self.stop(spent)
            if self._stopping:
                return None
        message = ahead.message if ahead is not None else None
        if message is None:
            try:
                message = self._build(row)
            except Exception as exc:  # one recipient's bad data must not end the run
                self._record(row, S.FAILED, None, reply=f"cannot build the message: {exc}")
                return None
        accepted = False  # the mark committed: the body goes out next
        upcoming: Ahead | None = None

        async def on_accepted() -> None:
            nonlocal accepted
            # A row planned with its Message-ID (the message carries it) keeps it untouched.
            known = row.message_id is not None and row.message_id == message.message_id
            mid = None if known else message.message_id
            try:
                marked = await self.commit.mark(row.id, mid, session.relay)
            except asyncio.CancelledError:
                # Abandoned while the mark waited for its commit: the body never goes out,
                # and the row goes back (this outcome follows the mark in the journal).
                self._record(row, S.DEFERRED, None, reply="stopped before the upload")
                raise
            if not marked:
                raise LeaseLostError
            accepted = True

        def meanwhile() -> OutgoingMessage | None:
            nonlocal upcoming
            upcoming = self._take_ahead()
            return upcoming.message if upcoming is not None else None

        try:
            result = await session.send(message, on_accepted, meanwhile)
        except asyncio.CancelledError:
            if accepted:
                self._record(row, S.UNKNOWN, None, reply="stopped during DATA", attempted=False)
            raise
        except LeaseLostError:  # reaped while paused: the body was not sent
            self.stop(LEASE_LOST)
            return None
        except TransportError as exc:
            # A reconnect met a setup fault (certificate, AUTH): no message can go out now. The
            # row was not attempted; the run stops resumable rather than failing as a whole.
            self.stop(f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
            return None
        self._handle(row, result, attempted=not accepted)
        return upcoming

    def _build(self, row: Delivery) -> OutgoingMessage:
        # Planning checked and stored the row's two str columns (nothing to validate per
        # message); build() checks both again as header values. The VERP tag names the row.
        subscriber = Subscriber.model_construct(envelope=row.envelope, name=row.name)
        return self.job.build(subscriber, row.message_id, row.id)

    def _take_ahead(self) -> Ahead | None:
        """Just before a body goes out: the next row for this session if it may go at once
        (a row waits in the queue, the rates allow it), built now, so its envelope can follow
        the body in the same write (smtp.py)."""
        upcoming = self.supply.peek()
        if self._stopping or upcoming is None:
            return None
        if self.pace.destinations.resting(upcoming.recipient) or not self.pace.take_now():
            return None
        row = self.supply.take()
        assert row is upcoming
        try:
            return Ahead(row, self._build(row))
        except Exception:  # its attempt builds it again and records why
            return Ahead(row, None)

    def _handle(self, row: Delivery, result: Result, *, attempted: bool) -> None:
        outcome = result.outcome
        if reason := self._breaker.judge(result):
            self.stop(reason)
        if outcome == Outcome.THROTTLED and result.scope == Scope.DESTINATION:
            # Only that domain rests; the row is due again when it does, and the throttle
            # is not the row's own try (a domain that keeps throttling stops the run instead).
            due = self.pace.destinations.throttled(row.recipient, result.describe())
            self._record(
                row, S.DEFERRED, result, attempted=attempted, next_attempt_at=due, tried=False
            )
            return
        if outcome == Outcome.THROTTLED:
            elapsed = max(time.monotonic() - self._started, 1e-3)
            if self.pace.slow_down(self._sent / elapsed) >= self.options.breaker_threshold:
                self.stop(f"the server keeps throttling us ({result.describe()})")
        if outcome == Outcome.SENT:
            self._sent += 1
            self.pace.sent(row.recipient)
            self._record(row, S.SENT, result)
        elif outcome == Outcome.REJECTED:
            self._record(row, S.REJECTED, result, attempted=attempted)
            if result.code is not None:
                self._policy.refused(row, result.code, result.reply)
        elif outcome == Outcome.FAILED:
            self._record(row, S.FAILED, result, attempted=attempted)
        elif outcome == Outcome.UNKNOWN:
            self._record(row, S.UNKNOWN, result)
        elif outcome == Outcome.STOPPED:
            self._record(row, S.DEFERRED, result, attempted=attempted)
            self.stop(f"the server refuses to take more mail: {result.describe()}")
        else:  # DEFERRED, RETRY, THROTTLED: not delivered, nothing in doubt
            self._retry(row, result, attempted=attempted)
        rated = outcome in (Outcome.SENT, Outcome.REJECTED)
        if rated and (rates := self._rates.check(rejected=outcome == Outcome.REJECTED)):
            self.stop(f"{rates}: stopped to protect the sender's reputation")

    def _retry(self, row: Delivery, result: Result, *, attempted: bool) -> None:
        """Back to the outbox, due again after the backoff (claimed again while this run has
        tried it fewer than max_attempts times)."""
        opts = self.options
        delay = RetryPolicy(opts.retry_base, opts.retry_cap).delay(row.attempts + 1)
        self._record(
            row, S.DEFERRED, result, attempted=attempted, next_attempt_at=time.time() + delay
        )

    def _record(
        self,
        row: Delivery,
        state: DeliveryStatus,
        result: Result | None,
        *,
        reply: str = "",
        attempted: bool = False,
        next_attempt_at: float = 0.0,
        tried: bool = True,
    ) -> None:
        """The outcome into the commit step; counted and shown once committed. `tried` False:
        not a try of the row this run (its destination throttled us)."""

        def committed(written: bool) -> None:
            if not written:
                # Reaped: the row is another's (or `unknown`); the outcome was not written
                # over it (that could double it), and this worker must stop.
                self.stop(LEASE_LOST)
                return
            previous = row.state  # a claimed row is recorded once; its next claim reads anew
            self._counts[previous] = self._counts.get(previous, 0) - 1
            self._counts[state] = self._counts.get(state, 0) + 1
            self._this_run[state] += 1
            if self.progress:
                counts = dict(self._counts)
                self.progress(Event(row.recipient, state, result, counts, previous))

        self.commit.record(
            row.id,
            state,
            committed,
            code=result.code if result else None,
            reply=result.reply if result else reply,
            attempted=attempted,
            next_attempt_at=next_attempt_at,
            relay=result.relay if result else "",
            counted=tried,
        )

    def _release(self, row: Delivery, due: float) -> None:
        """Back to the outbox as it was, due when its destination is; not a try of it."""
        code, reply, then = row.smtp_code, row.smtp_reply, self._owned
        self.commit.record(
            row.id, row.state, then, code=code, reply=reply, next_attempt_at=due, counted=False
        )

    def _owned(self, written: bool) -> None:
        if not written:  # reaped meanwhile: the row is another's now
            self.stop(LEASE_LOST)
