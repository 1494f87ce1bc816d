"""One row of an export as the formats see it: its cells by header name in; the Row a format
makes of them out (the address, the name, the consent, or why this person is not imported),
and the Format that names a tool's layout and its mapping."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from newsletter.importers.outcomes import RefusalKind
from newsletter.importers.values import parse_ip, parse_time


@dataclass(frozen=True)
class Cells:
    """One row's cells by lower-cased header name; the first column of a name wins."""

    header: Sequence[str]  # as written, for messages and evidence
    index: dict[str, int]
    row: Sequence[str]

    def get(self, name: str) -> str:
        at = self.index.get(name)
        return self.row[at].strip() if at is not None else ""

    def label(self, name: str) -> str:
        at = self.index.get(name)
        return self.header[at].strip() if at is not None else name

    def evidence(self, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
        """The named cells that are present and not empty, verbatim, in the file's order."""
        present = sorted(self.index[n] for n in names if n in self.index)
        return tuple(
            (self.header[i].strip(), self.row[i].strip()) for i in present if self.row[i].strip()
        )


@dataclass
class Row:
    """What a format makes of one row, before the address is checked."""

    email: str
    email_field: str
    name: str = ""
    name_field: str = "name"
    suppress: str | None = None  # the reason, for a person never to mail
    suppressed_at: dt.datetime | None = None
    detail: str = ""
    subscribed_at: dt.datetime | None = None
    subscribed_ip: str | None = None
    confirmed_at: dt.datetime | None = None
    confirmed_ip: str | None = None
    evidence: tuple[tuple[str, str], ...] = ()
    refusal: tuple[str, str, RefusalKind] | None = None  # (field, reason, kind)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (field, reason)

    def refuse(self, field_name: str, reason: str, kind: RefusalKind = "invalid") -> Row:
        self.refusal = (field_name, reason, kind)
        return self

    def time(self, cells: Cells, column: str) -> dt.datetime | None:
        """The cell parsed as a UTC time; a cell that is no time is a warning and None."""
        try:
            return parse_time(cells.get(column))
        except ValueError as exc:
            self.warnings.append((cells.label(column), f"{exc}; kept as written"))
            return None

    def ip(self, cells: Cells, column: str) -> str | None:
        try:
            return parse_ip(cells.get(column))
        except ValueError as exc:
            self.warnings.append((cells.label(column), f"{exc}; kept as written"))
            return None


RowMapper = Callable[[Cells], Row]


@dataclass(frozen=True)
class Format:
    """One tool's layout. `required` are the columns without which a file is not its export;
    `detect` tells its header from the others'; `mapper` reads a header and returns the
    function that maps each of its rows."""

    name: str
    label: str
    required: tuple[str, ...]
    detect: Callable[[frozenset[str]], bool]
    mapper: Callable[[frozenset[str]], RowMapper]


def name_of(cells: Cells, *candidates: tuple[str, ...]) -> tuple[str, str]:
    """(name, the column it came from): the first candidate whose cells are not all empty;
    a candidate of several columns (first name, last name) is joined with a space."""
    for columns in candidates:
        parts = [cells.get(c) for c in columns]
        if any(parts):
            return " ".join(p for p in parts if p), cells.label(columns[0])
    return "", cells.label(candidates[0][0]) if candidates else "name"
