"""What an erasure test reads back: every value of every column of every table of a SQLite
outbox as text (where an address could hide, a JSON field included), and the file's raw
bytes with its WAL's; the same text of an open outbox on either backend."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from newsletter.database import Database


def dump(path: Path | str) -> str:
    """Every row of every table of the SQLite file at `path`, each as its repr, one a line."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(
            repr(row)
            for table in tables
            for row in db.execute(f'SELECT * FROM "{table}"')  # noqa: S608 (its own names)
        )
    finally:
        db.close()


def raw_bytes(path: Path) -> bytes:
    """The database file's bytes and its -wal's (if any), as they are on disk now."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def dump_outbox(database: Database) -> str:
    """Every row of every table of an open outbox, SQLite or PostgreSQL, each as its repr, one
    a line (a JSON column is its text, so its fields are in it)."""
    backend = database.backend
    if backend.name == "sqlite":
        listed = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        listed = (
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    tables = [str(r[0]) for r in backend.fetch(listed)]
    return "\n".join(
        repr(tuple(row))
        for table in tables
        for row in backend.fetch(f'SELECT * FROM "{table}"')  # noqa: S608 (its own names)
    )
