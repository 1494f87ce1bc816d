"""Delivery rows in; CSV a spreadsheet can open safely out (`newsletter status --csv`)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

from newsletter.outbox import Delivery

CSV_COLUMNS = (
    "recipient",
    "state",
    "attempts",
    "smtp_code",
    "smtp_reply",
    "message_id",
    "updated_at",
    "sent_at",
)


def write_csv(rows: Iterable[Delivery], handle: TextIO) -> int:
    """The log as CSV for a spreadsheet; every cell is neutralised against formula injection."""
    writer = csv.writer(handle)
    writer.writerow(CSV_COLUMNS)
    n = 0
    for row in rows:
        writer.writerow([neutralise(getattr(row, column)) for column in CSV_COLUMNS])
        n += 1
    return n


def neutralise(value: object) -> str:
    """A cell a spreadsheet would run as a formula (= + - @, or a leading tab/CR) gets a `'`
    (OWASP "CSV injection")."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
