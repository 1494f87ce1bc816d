"""What the outbox hands out: rows of the delivery log, suppressions and plan counts, as values."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from newsletter.models import DeliveryStatus

S = DeliveryStatus
# States a plain re-run sends (again); the others need a flag or are final.
DUE = (S.PENDING, S.DEFERRED)
IN_DOUBT = "interrupted during DATA: the server may have accepted it"
UNSUBSCRIBED = "unsubscribed"  # the reason on a `skipped` row whose address is suppressed
# The suppression source of `newsletter unsubscribe`: the editor's, which a reader cannot lift.
EDITOR_SOURCE = "cli"
DEPARTED = "no longer on the list"  # the reason on a waiting row whose reader left the list
# Suppression sources written by `newsletter bounces` (and refusals at send time); each is also
# the reason on the `skipped` rows of later sends.
BOUNCED = "bounced"
COMPLAINED = "complained"
# The rows free to claim, in SQL. Literal, not bound: the planner uses the partial index
# `deliveries_free` only when a query repeats its predicate word for word.
FREE = "state IN ('pending', 'deferred') AND owner IS NULL"


def now() -> str:
    """UTC now as ISO 8601 with milliseconds (what datetime.isoformat gives, a third of the
    cost: a send stamps two rows per message)."""
    moment = time.time()
    second = int(moment)
    if second != _second[0]:
        _second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_second[1]}.{int((moment - second) * 1000):03d}+00:00"


_second: list[int | str] = [-1, ""]  # the last whole second and its formatted text


@dataclass(frozen=True)
class Delivery:
    """One row of the delivery log; `envelope` and `name` are the recipient as planned."""

    id: int
    issue: int
    list: str
    recipient: str
    message_id: str | None
    state: DeliveryStatus
    attempts: int
    smtp_code: int | None
    smtp_reply: str
    created_at: str
    updated_at: str
    sent_at: str | None
    next_attempt_at: float
    envelope: str = ""
    name: str = ""
    relay: str = ""  # the relay that took (or holds) its message; "" none yet


COLUMNS = (
    "id, issue, list, recipient, message_id, state, attempts, smtp_code, smtp_reply,"
    " created_at, updated_at, sent_at, next_attempt_at, envelope, name, relay"
)


def delivery_from_row(values: tuple[Any, ...]) -> Delivery:
    """A row selected as COLUMNS, from either backend (both hand out tuples)."""
    return Delivery(
        id=values[0],
        issue=values[1],
        list=values[2],
        recipient=values[3],
        message_id=values[4],
        state=DeliveryStatus(values[5]),
        attempts=values[6],
        smtp_code=values[7],
        smtp_reply=values[8],
        created_at=values[9],
        updated_at=values[10],
        sent_at=values[11],
        next_attempt_at=float(values[12]),
        envelope=values[13] or values[3],
        name=values[14] or "",
        relay=values[15] or "",
    )


@dataclass(frozen=True)
class Suppression:
    """An address never sent to again on a list: since when, and who asked (`source`)."""

    list: str
    address: str
    source: str
    created_at: str


@dataclass(frozen=True)
class Worker:
    """A worker registered on a send: where it runs, when it was last seen, its lease."""

    id: str
    issue: int
    list: str
    host: str
    pid: int
    started_at: str
    seen_at: str
    lease_until: float
    state: str


@dataclass(frozen=True)
class PlanResult:
    """A plan's counts: `total` rows, of which `waiting` to send and `skipped` by this plan
    (suppressed, or off the list); the rest were settled by earlier runs. `added`: rows new
    since the last plan (all of them on a first)."""

    added: int
    skipped: int
    total: int
    waiting: int = 0

    @property
    def earlier(self) -> int:
        return self.total - self.waiting - self.skipped
