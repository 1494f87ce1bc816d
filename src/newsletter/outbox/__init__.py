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
from newsletter.outbox.runs import Planned, PlannedRow, Worker
from newsletter.outbox.schema import LATEST, MIGRATIONS, Migration
from newsletter.outbox.sqlite import SqliteOutbox
from newsletter.outbox.store import is_postgres

__all__ = [
    "DEPARTED",
    "DUE",
    "EDITOR_SOURCE",
    "IN_DOUBT",
    "LATEST",
    "MIGRATIONS",
    "UNSUBSCRIBED",
    "Delivery",
    "Migration",
    "Outbox",
    "PlanResult",
    "Planned",
    "PlannedRow",
    "Suppression",
    "Worker",
    "is_postgres",
    "open_outbox",
    "outbox_exists",
]


def open_outbox(target: Path | str, *, migrate: bool = True) -> Outbox:
    """The outbox at `target`, its schema brought up to date (unless `migrate` is False): a
    Path is a SQLite file, a `postgresql://` URL a PostgreSQL database."""
    if is_postgres(target):
        # Imported only when used: SQLite users never load psycopg.
        from newsletter.outbox.postgres import PostgresOutbox

        return PostgresOutbox(str(target), migrate=migrate)
    return SqliteOutbox(Path(target), migrate=migrate)


def outbox_exists(target: Path | str) -> bool:
    """Whether there is a log to read (read-only commands never create the SQLite file)."""
    return is_postgres(target) or Path(target).exists()
