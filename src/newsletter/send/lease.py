"""One worker's place in a send: an outbox and a worker id in, a registered, renewed lease out.

A worker registers when it starts and renews its lease every third of it, from its first step to
its last: the engine's keeper does while it delivers, and `keep` between the batches of a plan
and while waiting for another worker's plan; on PostgreSQL a thread of its own renews it too while
the worker plans (`kept_alive`), so neither a long plan nor one slow statement lets another worker
reap its planner. A worker that stops renewing (killed, frozen, cut off) is reaped by the others
once the lease expires. The engine's renewals also reap the workers whose lease ran out and tell how
many share the send, so each one takes its share of the run's rate (the rate is the whole
run's, whatever the number of workers). `why_gone` tells `status` which registered workers are
gone without retiring.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from newsletter.database import Database, Delivery, Worker, open_database
from newsletter.errors import DatabaseError

LEASE_LOST = "this worker lost its lease (it was paused longer than [send] lease)"


class LeaseLostError(Exception):
    """This worker's lease was reaped: its rows may be another's now; it must stop at once."""


def worker_id() -> str:
    """host:pid:random: names the worker in `status` and is unique across machines."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class Lease:
    database: Database
    worker: str
    issue: int
    list_name: str
    seconds: float
    _renewed: float = field(default=0.0, init=False)
    _lost: threading.Event = field(default_factory=threading.Event, init=False)

    def __enter__(self) -> Lease:
        self.database.leases.register(
            self.worker, self.issue, self.list_name, socket.gethostname(), os.getpid(), self.seconds
        )
        self._renewed = time.monotonic()
        return self

    def __exit__(self, et: type[BaseException] | None, *exc: object) -> None:
        try:
            self.database.leases.retire(self.worker)
        except DatabaseError:
            if et is None:
                raise
            # Leaving on an error of the outbox (its disk full, its connection lost): that one
            # is reported; the lease expires on its own and `status` says the worker is gone.

    @property
    def interval(self) -> float:
        return self.seconds / 3

    def renew(self) -> bool:
        """False once the lease was lost (reaped by another worker): stop at once."""
        self._renewed = time.monotonic()
        return self.database.leases.renew(self.worker, self.seconds)

    def keep(self) -> None:
        """Renew if a third of the lease has passed since the last renewal: for a step that
        does not return to the event loop for a while (planning). LeaseLostError if lost."""
        if self._lost.is_set():
            raise LeaseLostError(LEASE_LOST)
        if time.monotonic() - self._renewed >= self.interval and not self.renew():
            raise LeaseLostError(LEASE_LOST)

    @contextmanager
    def kept_alive(self) -> Iterator[None]:
        """The lease renewed every third of it from a thread of its own, on a connection of its
        own, while the caller's statements may each take long (a plan's batches and its last
        statements on a loaded database server): how long one statement takes no longer decides
        whether this worker is reaped. A lost lease is raised by the next `keep`. Shared
        databases (PostgreSQL) only: on SQLite no other machine reaps a live process, and a
        second connection would only wait for the planner's write lock."""
        if not self.database.shared:
            yield
            return
        stop = threading.Event()

        def renew() -> None:
            try:
                with open_database(self.database.backend.target, migrate=False) as own:
                    while not stop.wait(self.interval):
                        if not own.leases.renew(self.worker, self.seconds):
                            self._lost.set()
                            return
            except DatabaseError:
                pass  # the worker's own connection meets the same fault and reports it

        keeper = threading.Thread(target=renew, name="lease-keeper", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join()

    def reap(self) -> list[Delivery]:
        """The uploads of workers whose lease expired, now `unknown` (on SQLite too: a worker
        process that died leaves its rows to its siblings the same way)."""
        return self.database.leases.reap(self.issue, self.list_name)

    def sharing(self) -> int:
        """How many workers share the send now (this one included)."""
        return max(1, len(self.database.leases.workers(self.issue, self.list_name)))


def why_gone(worker: Worker, clock: float) -> str:
    """Why a worker registered on a send is not sending any more ('' if it may be): its lease
    expired (`clock` is the database's time), or it ran on this host and its process is not
    running. A worker that dies without retiring (killed, or stopped by a fault of the outbox)
    stays registered until the next run reaps it."""
    if worker.lease_until < clock:
        return f"gone: its lease expired {clock - worker.lease_until:.0f} s ago"
    if worker.host == socket.gethostname() and not _running(worker.pid):
        return f"gone: no process {worker.pid} runs on this host"
    return ""


def _running(pid: int) -> bool:
    if pid <= 0:  # kill(0) would ask about a whole process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
