"""The delivery log (the "outbox"): rows and suppressions in SQLite or PostgreSQL behind one
interface. `open_outbox(target)` opens a SQLite file (a Path) or a PostgreSQL database (a URL)."""

from pathlib import Path

from newsletter.outbox.base import Outbox
from newsletter.outbox.records import (
    DEPARTED,
    DUE,
    EDITOR_SOURCE,
    IN_DOUBT,
    UNSUBSCRIBED,
    Delivery,
    PlanResult,
    Suppression,
)
from newsletter.outbox.runs import Planned, Worker
from newsletter.outbox.sqlite import SqliteOutbox
from newsletter.outbox.store import is_postgres

__all__ = [
    "DEPARTED",
    "DUE",
    "EDITOR_SOURCE",
    "IN_DOUBT",
    "UNSUBSCRIBED",
    "Delivery",
    "Outbox",
    "PlanResult",
    "Planned",
    "Suppression",
    "Worker",
    "is_postgres",
    "open_outbox",
    "outbox_exists",
]


def open_outbox(target: Path | str) -> Outbox:
    """The outbox at `target`, its schema brought up to date: a Path (or `sqlite:///`-less
    path string) is a SQLite file, a `postgresql://` URL a PostgreSQL database."""
    if is_postgres(target):
        # Imported only when used: SQLite users never load psycopg.
        from newsletter.outbox.postgres import PostgresOutbox

        return PostgresOutbox(str(target))
    return SqliteOutbox(Path(target))


def outbox_exists(target: Path | str) -> bool:
    """Whether there is a log to read (read-only commands never create the SQLite file)."""
    return is_postgres(target) or Path(target).exists()
