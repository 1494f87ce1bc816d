"""What an erasure test reads back: every value of every column of every table of a SQLite
outbox as text (where an address could hide, a JSON field included), and the file's raw
bytes with its WAL's."""

from __future__ import annotations

import sqlite3
from pathlib import Path


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
