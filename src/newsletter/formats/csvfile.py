"""CSV text in; its records out, each with the line it starts on, or why it cannot be read.

Python's csv reads a field that opens with `"` and never closes up to the end of the file (or up
to its field size limit), swallowing every later row. Here the record that opened the quote is
reported instead and the lines after its first are read again as records of their own, so a
stray quote costs one row and every line of the file is accounted for.

A line is read MAX_LINE characters at most: a longer one (a subscriber row is a few hundred) is
reported by its number and skipped unread, so a file of one 200 MB line costs no more memory than
a file of short ones.
"""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

MAX_LINE = 64 * 1024  # characters
TOO_LONG = (
    f"is longer than {MAX_LINE:,} characters (a subscriber row takes a few hundred), so it was "
    "not read: is this the right file? Shorten the line or remove it"
)
UNCLOSED_QUOTE = (
    'opens a double quote (") that is never closed, so every later line would be read into '
    'it; close the quote or remove it (inside quotes, write a quote as "")'
)


@dataclass(frozen=True)
class Unreadable:
    """A record that cannot be read; `field` is the index of the field at fault, if known."""

    field: int | None
    reason: str


DELIMITERS = ",;\t"


def read_records(handle: TextIO) -> Iterator[tuple[int, list[str] | Unreadable]]:
    """(line the record starts on, its fields or why it cannot be read), one record at a time.

    `handle` must be opened with newline="" (csv's rule), so quoted line breaks survive. The
    delimiter is sniffed from the header line (csv.Sniffer, among comma, semicolon and tab):
    a spreadsheet set to a European locale saves `email;name`, and read with commas every row
    would be one field.
    """
    lines = _Lines(handle)
    delimiter = _sniff(lines)
    reader = csv.reader(lines, strict=False, delimiter=delimiter)
    while True:
        start = lines.number + 1
        lines.taken = []
        try:
            row = next(reader, None)
        except csv.Error as exc:
            field = _open_quote("".join(lines.taken), delimiter)
            # The lines the record took beyond its first are read again as records of their own.
            lines.replay(lines.taken[1:])
            if field is None:
                yield start, Unreadable(None, f"cannot be parsed ({exc})")
            else:
                yield start, Unreadable(field, UNCLOSED_QUOTE)
            continue
        if row is None:
            return
        if len(lines.taken) > 1:
            field = _open_quote("".join(lines.taken), delimiter)
            if field is not None:
                lines.replay(lines.taken[1:])
                yield start, Unreadable(field, UNCLOSED_QUOTE)
                continue
        if lines.too_long(start):  # after the replay above, which reads its lines again
            yield start, Unreadable(None, TOO_LONG)
            continue
        yield start, row


class _Lines:
    """The file's physical lines for csv.reader, keeping those of the record being read."""

    def __init__(self, handle: TextIO) -> None:
        self._handle = handle
        self._replay: deque[str] = deque()
        self._long: set[int] = set()  # numbers of the lines longer than MAX_LINE
        self.taken: list[str] = []
        self.number = 0  # physical lines handed to the reader so far

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._replay.popleft() if self._replay else self._read()
        self.taken.append(line)
        self.number += 1
        return line

    def _read(self) -> str:
        """The next physical line; one longer than MAX_LINE is read past in pieces and handed
        on as an empty line, its number kept for too_long."""
        line = self._handle.readline(MAX_LINE + 2)  # room for the line's own \r\n
        if not line:
            raise StopIteration
        if len(line.rstrip("\r\n")) <= MAX_LINE:
            return line
        while line and not line.endswith(("\n", "\r")):
            line = self._handle.readline(MAX_LINE)
        self._long.add(self.number + 1)
        return "\n"

    def too_long(self, start: int) -> bool:
        """Whether the record from line `start` to the last taken had a line too long."""
        found = {n for n in self._long if start <= n <= self.number}
        self._long -= found
        return bool(found)

    def replay(self, lines: list[str]) -> None:
        """Hand `lines` to the reader again, before anything not read yet."""
        self._replay.extendleft(reversed(lines))
        self.number -= len(lines)


def _sniff(lines: _Lines) -> str:
    """The header line's delimiter (comma when the line has one column or none): the line is
    read and handed back, so the reader still starts at line 1."""
    header = next(lines, None)
    if header is None:
        return ","
    lines.replay([header])
    try:
        return csv.Sniffer().sniff(header, delimiters=DELIMITERS).delimiter
    except csv.Error:  # one column (`email`): no delimiter to find
        return ","


def _open_quote(text: str, delimiter: str = ",") -> int | None:
    """The index of the field whose quote `text` (one record's lines) leaves open, if any.

    Follows csv's default dialect: `""` inside quotes is a quote. A quote also counts as open
    when it is "closed" by a stray `"` followed by anything but the delimiter or a line end: the
    lenient reader accepts that, and it is how a second stray quote would hide the lines in
    between.
    """
    field, opened, state = 0, 0, "start"
    for char in text:
        if state == "quoted":
            state = "quote" if char == '"' else "quoted"
        elif char == delimiter:
            field, state = field + 1, "start"
        elif state == "start" and char == '"':
            opened, state = field, "quoted"
        elif state == "quote" and char == '"':
            state = "quoted"
        elif state == "quote" and char not in "\r\n":
            return opened
        else:
            state = "field"
    return opened if state == "quoted" else None
