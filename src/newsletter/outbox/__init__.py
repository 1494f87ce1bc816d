"""The delivery log (the "outbox"): rows and suppressions in SQLite or PostgreSQL behind one
interface. `Outbox(target)` opens a SQLite file (a Path) or a PostgreSQL database (a URL)."""

from newsletter.outbox.base import Outbox
from newsletter.outbox.records import (
    CSV_COLUMNS,
    DEPARTED,
    DUE,
    IN_DOUBT,
    UNSUBSCRIBED,
    Delivery,
    PlanResult,
    Suppression,
    neutralise,
    normalize,
    write_csv,
)
from newsletter.outbox.runs import Planned, Worker
from newsletter.outbox.store import is_postgres

__all__ = [
    "CSV_COLUMNS",
    "DEPARTED",
    "DUE",
    "IN_DOUBT",
    "UNSUBSCRIBED",
    "Delivery",
    "Outbox",
    "PlanResult",
    "Planned",
    "Suppression",
    "Worker",
    "is_postgres",
    "neutralise",
    "normalize",
    "write_csv",
]
