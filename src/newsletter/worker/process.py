"""`newsletter worker`: the long-running process that does what falls due; settings in, duties
run until SIGTERM out.

A worker runs duties, each a loop of its own in one event loop: a duty starts (connects,
recovers what a dead worker left), then looks again and again (`run_once` does what is due now
and says how long until the next look is worth it), and stops when the worker does. The duties:
the site's mail (send/courier.py: confirmations within a second of the signup, whatever else
the worker or a bulk send is doing, since each duty has its own outbox connection and SMTP
sessions), and click retention (clicks/retention.py: events past `[privacy] retention_days`
deleted as they age), bounce-report retention (bounces/retention.py: the reports held for review
past `[privacy] held_retention_days` deleted, the server's text of the others and the stored
SMTP replies past `[privacy] bounce_text_days` cleared), and scheduled sends (schedule/duty.py:
each due send started by exactly one worker, as `newsletter send` runs it, after the issue
passed its check again), welcome sequences (sequences/duty.py: each reader's due step sent
once), and the heartbeat (a row in the outbox, rewritten every few seconds,
by which `newsletter doctor` tells a live worker from a dead one).

On SQLite one worker runs per project (a lock the kernel drops when the process dies); on
PostgreSQL any number, on any machines: leases on the database's clock decide who sends what.
SIGTERM or Ctrl-C lets every duty finish the look it is in (a mail whose body is going out is
finished and recorded), then stop; a second one stops at once (a mail in the middle of its
upload is then `unknown`, never sent again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from newsletter.bounces.retention import BounceRetentionDuty
from newsletter.clicks.retention import RetentionDuty
from newsletter.config.settings import Settings
from newsletter.database import Database, open_project_database
from newsletter.database.heartbeats import BEAT_EVERY
from newsletter.database.mailqueue import SiteMail
from newsletter.errors import DatabaseError, DeliveryError
from newsletter.mail.tokens import SigningKey
from newsletter.schedule.duty import ScheduleDuty
from newsletter.send.courier import Courier
from newsletter.send.preparation import smtp_pool
from newsletter.sequences.duty import SequenceDuty
from newsletter.state.statefiles import held_lock
from newsletter.worker import scheduledsend

Log = Callable[[str], None]
FAULT_PAUSE = 5.0  # seconds after a fault of the outbox before the next look


class Duty(Protocol):
    """One job of the worker."""

    name: str

    async def start(self) -> None: ...

    async def run_once(self) -> float:
        """Do what is due now; seconds until the next look."""
        ...

    async def stop(self) -> None: ...


def worker_owner() -> str:
    """This worker's name in the outbox's claims: host, pid and a random part (a pid comes
    back after a reboot; a claim must not)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class SiteMailDuty:
    """The site's mail (send/courier.py) on a connection and a pool of its own."""

    name = "site mail"

    def __init__(self, settings: Settings, key: SigningKey, owner: str, log: Log) -> None:
        self.settings = settings
        self.key = key
        self.owner = owner
        self.log = log
        self.database: Database | None = None
        self.courier: Courier | None = None
        self._renewing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        database = self._connect()
        backend = database.backend
        pool = smtp_pool(self.settings, self.settings.worker.concurrency)
        self.courier = Courier(
            backend, self.settings, self.key.secret, pool, self.owner, log=self.log
        )
        # SQLite allows one worker: every claim in the queue is a dead worker's. PostgreSQL:
        # only those whose lease ran out.
        for mail in self.courier.queue.reap(keep=self.owner, everyone=not database.shared):
            self._lost(mail)
        self._renewing = asyncio.create_task(self._renew())

    async def run_once(self) -> float:
        assert self.courier is not None
        try:
            if self.database is None or self.database.broken:
                self._reconnect()
            return await self.courier.deliver_due()
        except DatabaseError as exc:
            self.log(f"the outbox failed: {exc.message}; trying again in {FAULT_PAUSE:.0f} s")
            return FAULT_PAUSE

    async def stop(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        if self.courier is not None:
            with contextlib.suppress(DatabaseError):
                self.courier.stop()
            await self.courier.pool.close()
        if self.database is not None:
            with contextlib.suppress(DatabaseError):
                self.database.close()

    async def _renew(self) -> None:
        """The claims of this worker kept alive while it lives, a third of the lease apart;
        on PostgreSQL, the claims of workers that died ended as often."""
        while True:
            await asyncio.sleep(self.settings.worker.lease / 3)
            if self.courier is None or self.database is None or self.database.broken:
                continue
            with contextlib.suppress(DatabaseError):
                self.courier.renew()
                if self.database.shared:
                    for mail in self.courier.queue.reap(keep=self.owner):
                        self._lost(mail)

    def _lost(self, mail: SiteMail) -> None:
        self.log(
            f"site mail {mail.id}: {mail.kind} to {mail.recipient}: unknown ({mail.smtp_reply})"
        )

    def _connect(self) -> Database:
        self.database = open_project_database(self.settings)
        return self.database

    def _reconnect(self) -> None:
        if self.database is not None:
            with contextlib.suppress(Exception):
                self.database.close()
        database = self._connect()
        assert self.courier is not None
        self.courier.rebind(database.backend)


class HeartbeatDuty:
    """The worker's beat in the outbox, every BEAT_EVERY seconds, on a connection opened for
    each beat off the event loop (a beat is one statement; a pool would outlive its use)."""

    name = "heartbeat"

    def __init__(self, settings: Settings, owner: str, log: Log) -> None:
        self.settings = settings
        self.owner = owner
        self.log = log

    async def start(self) -> None:
        return None

    async def run_once(self) -> float:
        try:
            await asyncio.to_thread(self._beat)
        except DatabaseError as exc:
            self.log(f"heartbeat: the outbox failed: {exc.message}")
        return BEAT_EVERY

    async def stop(self) -> None:
        return None

    def _beat(self) -> None:
        with open_project_database(self.settings) as database:
            database.heartbeats.beat(self.owner, socket.gethostname(), os.getpid(), time.time())


async def run_duties(duties: Sequence[Duty], stop: asyncio.Event, *, once: bool = False) -> None:
    """Every duty in a loop of its own until `stop` is set (or, `once`, until nothing is due)."""

    async def loop(duty: Duty) -> None:
        await duty.start()
        try:
            while not stop.is_set():
                wait = await duty.run_once()
                if once and wait > 0:  # nothing more due now
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
        finally:
            await duty.stop()

    await asyncio.gather(*(loop(duty) for duty in duties))


def run_worker(
    settings: Settings,
    key: SigningKey,
    *,
    log: Log,
    once: bool = False,
    ready: Callable[[], None] | None = None,
    config: Path | None = None,
) -> None:
    """Run the worker's duties until SIGTERM or SIGINT (or, `once`, one look each). `config`
    is the file the worker was started with: the sends it starts read the same one."""
    with _alone(settings):
        asyncio.run(_main(settings, key, log, once, ready, config))


async def _main(
    settings: Settings,
    key: SigningKey,
    log: Log,
    once: bool,
    ready: Callable[[], None] | None,
    config: Path | None,
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal() -> None:
        if stop.is_set() and main is not None:
            main.cancel()  # the second signal: now
        stop.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, on_signal)
    owner = worker_owner()
    duties: list[Duty] = [
        HeartbeatDuty(settings, owner, log),
        SiteMailDuty(settings, key, owner, log),
        RetentionDuty(settings, log),
        BounceRetentionDuty(settings, log),
        ScheduleDuty(settings, owner, log, scheduledsend.command, config=config, once=once),
        SequenceDuty(settings, key, owner, log),
    ]
    if ready is not None:
        ready()
    try:
        await run_duties(duties, stop, once=once)
    except asyncio.CancelledError:
        log(
            "stopped at once: a site mail being uploaded is left unknown; a scheduled send"
            " stops as after a second Ctrl-C and is resumed once its lease runs out"
        )
    finally:
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(number)


@contextmanager
def site_mail_beside(settings: Settings, key: SigningKey, log: Log) -> Iterator[None]:
    """The site's mail (the worker's duty) sent from a thread of this process while the block
    runs: `serve --local` sends its own confirmations, whose links carry its own address (the
    worker builds them from base_url). Under the worker's lock on SQLite, so no `newsletter
    worker` sends them with the public address instead (DeliveryError if one runs)."""
    with _alone(settings):
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()  # bound to `loop` when the duty first waits on it
        duty = SiteMailDuty(settings, key, worker_owner(), log)

        def run() -> None:
            try:
                loop.run_until_complete(run_duties([duty], stop))
            finally:
                loop.close()

        thread = threading.Thread(target=run, name="site mail", daemon=True)
        thread.start()
        try:
            yield
        finally:
            with contextlib.suppress(RuntimeError):  # the loop ended already (its fault shown)
                loop.call_soon_threadsafe(stop.set)
            thread.join(30)


@contextmanager
def _alone(settings: Settings) -> Iterator[None]:
    """SQLite: one worker per project, under a lock the kernel drops with the process.
    PostgreSQL: none; leases share the work."""
    target = settings.database_target
    if isinstance(target, str):
        yield
        return

    def refused(pid: str) -> DeliveryError:
        return DeliveryError(
            f"another `newsletter worker` runs on this project (pid {pid})",
            hint="One worker per project on SQLite; with a PostgreSQL outbox any number may run.",
        )

    with held_lock(settings.state_dir / "worker.lock", refused):
        yield
