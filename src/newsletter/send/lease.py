"""One worker's place in a send: an outbox and a worker id in, a registered, renewed lease out.

A worker registers when it starts and renews its lease every third of it; a worker that stops
renewing (killed, frozen, cut off) is reaped by the others once the lease expires. Every renewal
also reaps the workers whose lease ran out and tells how many share the send, so each one takes
its share of the run's rate (the rate is the whole run's, whatever the number of workers).
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from newsletter.outbox import Delivery, Outbox


def worker_id() -> str:
    """host:pid:random: names the worker in `status` and is unique across machines."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class Lease:
    outbox: Outbox
    worker: str
    issue: int
    list_name: str
    seconds: float

    def __enter__(self) -> Lease:
        self.outbox.register(
            self.worker, self.issue, self.list_name, socket.gethostname(), os.getpid(), self.seconds
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.outbox.retire(self.worker)

    @property
    def interval(self) -> float:
        return self.seconds / 3

    def renew(self) -> bool:
        """False once the lease was lost (reaped by another worker): stop at once."""
        return self.outbox.renew(self.worker, self.seconds)

    def reap(self) -> list[Delivery]:
        """The uploads of workers whose lease expired, now `unknown` (on SQLite too: a worker
        process that died leaves its rows to its siblings the same way)."""
        return self.outbox.reap(self.issue, self.list_name)

    def sharing(self) -> int:
        """How many workers share the send now (this one included)."""
        return max(1, len(self.outbox.workers(self.issue, self.list_name)))
