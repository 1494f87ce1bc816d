"""Rows in; CSV a spreadsheet can open safely out (`newsletter status --csv`, the click report):
no cell runs as a formula, and none carries a control character (the CSV also goes to
terminals, with `--csv -`, and to viewers that act on escapes)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from typing import TextIO

from newsletter.database import Delivery
from newsletter.formats.safetext import printable

CSV_COLUMNS = (
    "recipient",
    "state",
    "attempts",
    "smtp_code",
    "smtp_reply",
    "message_id",
    "updated_at",
    "sent_at",
    "relay",
)


def write_csv(rows: Iterable[Delivery], handle: TextIO) -> int:
    """The log as CSV for a spreadsheet; every cell is neutralised against formula injection
    and cleaned of control characters (a multi-line reply becomes one line)."""
    cells = ([getattr(row, column) for column in CSV_COLUMNS] for row in rows)
    return write_rows(CSV_COLUMNS, cells, handle)


def write_rows(columns: Sequence[str], rows: Iterable[Sequence[object]], handle: TextIO) -> int:
    """A header and rows as CSV, each cell made safe as write_csv's are; the rows written."""
    writer = csv.writer(handle)
    writer.writerow(columns)
    n = 0
    for row in rows:
        # Neutralised first, on the text as it came: a leading tab or CR is still seen.
        writer.writerow([printable(neutralise(cell)) for cell in row])
        n += 1
    return n


def neutralise(value: object) -> str:
    """A cell a spreadsheet would run as a formula (= + - @, or a leading tab/CR) gets a `'`
    (OWASP "CSV injection")."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
