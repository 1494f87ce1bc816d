"""An export file in (a CSV, or the ZIP a tool exports); a stream of Outcomes out: Imported
(a subscriber and their consent), ImportedSuppression, or Refused, one per row, and the counts.

`read_export` opens the file and reads every header at once, so a file that cannot be imported
at all (missing, not UTF-8, no tool's layout, a --format its header contradicts) is an
ExportFileError before anything is read; the rows come when the Export is iterated.

Rows go through the list reader's checks (csvfile.py for the CSV itself, subscribers.check_entry
for the address and name): a bad row is Refused with its line and field and the next one read.
An address seen twice in one import (ZIP members included) keeps the first row, except that a
suppression always wins: a later suppression is still handed on, and a subscriber after a
suppression of the same address is refused. Memory does not grow with the file: the addresses
seen are kept by seen.SeenKeys. A ZIP member found damaged halfway raises ExportFileError from
the iteration: the caller keeps nothing of that import (one transaction).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from newsletter.errors import ExportFileError, Problem, display_path
from newsletter.formats.csvfile import Unreadable, read_records
from newsletter.formats.textfile import SAVE_AS_UTF8, UTF16, looks_like_utf16
from newsletter.importers.formats import FORMATS, detect, unusable
from newsletter.importers.outcomes import (
    Consent,
    ExportFile,
    Imported,
    ImportedSuppression,
    ImportReport,
    Origin,
    Outcome,
    RefusalKind,
    Refused,
)
from newsletter.importers.rows import Cells, Format, Row, RowMapper
from newsletter.importers.seen import SeenKeys
from newsletter.importers.subscribers import Refusal, check_entry, fold_address
from newsletter.models import Subscriber

MAX_MEMBERS = 64  # CSVs read from one ZIP
_UNDECODABLE = re.compile(r"[\udc80-\udcff]")
# A key's first sighting is kept as one 32-bit number: a flag, the part and the line.
_SUPPRESSION = 1 << 31
_PART_SHIFT = 25
_LINE_MASK = (1 << _PART_SHIFT) - 1

Records = Iterator[tuple[int, list[str] | Unreadable]]
# What reading a damaged ZIP member raises: a bad CRC, a broken deflate stream, a cut file.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError)


@dataclass
class _Source:
    part: ExportFile
    handle: TextIO
    records: Records
    header: list[str]
    index: dict[str, int]
    mapper: RowMapper


class Export:
    """One import's rows, read once by iterating; `report` counts them as they go by and
    `parts` says which tool each CSV is. Close it (or use `with`) if not read to the end."""

    def __init__(self, sources: list[_Source], report: ImportReport, unsubscribed: bool) -> None:
        self._sources = sources
        self.report = report
        self._unsubscribed = unsubscribed
        self._zip: zipfile.ZipFile | None = None

    @property
    def parts(self) -> list[ExportFile]:
        return self.report.parts

    def __iter__(self) -> Iterator[Outcome]:
        with self, SeenKeys() as seen:
            for number, source in enumerate(self._sources):
                try:
                    for line, record in source.records:
                        outcome = self._outcome(seen, number, source, line, record)
                        if outcome is not None:
                            self.report.count(outcome)
                            yield outcome
                except _DAMAGED as exc:
                    raise ExportFileError(
                        f"{source.part.file}: is damaged and cannot be read to its end ({exc}); "
                        "keep nothing of this import and export the file again"
                    ) from None
                source.handle.close()

    def close(self) -> None:
        for source in self._sources:
            source.handle.close()
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _outcome(
        self,
        seen: SeenKeys,
        number: int,
        source: _Source,
        line: int,
        record: list[str] | Unreadable,
    ) -> Outcome | None:
        file, header = source.part.file, source.header
        origin = Origin(source.part.tool, file, line)

        def refuse(field: str, reason: str, kind: RefusalKind = "invalid") -> Refused:
            return Refused(Problem(file, line, field, reason), kind)

        if isinstance(record, Unreadable):
            at = record.field
            return refuse(
                header[at].strip() if at is not None and at < len(header) else "", record.reason
            )
        if not "".join(record).strip():
            return None
        width = len(header)
        if len(record) > width:
            if "".join(record[width:]).strip():
                return refuse(
                    "",
                    f"has {len(record)} fields but the header has {width} "
                    '(put a value that contains a comma in double quotes: "Chen, Alice")',
                )
            del record[width:]
        record += [""] * (width - len(record))
        if _UNDECODABLE.search("".join(record)):
            return refuse("", "is not valid UTF-8 (save the file as UTF-8)")
        row = source.mapper(Cells(header, source.index, record))
        for field, reason in row.warnings:
            self.report.warn(Problem(file, line, field, reason))
        if row.refusal is not None:
            return refuse(*row.refusal)
        if self._unsubscribed and row.suppress is None:
            row.suppress = "unsubscribed"  # the editor says every row of this file is one
        checked = check_entry(row.email, "" if row.suppress else row.name)
        if isinstance(checked, Refusal):
            field = row.email_field if checked.field == "email" else row.name_field
            return refuse(field if checked.field else "", checked.reason)
        envelope, name = checked
        key = fold_address(envelope)
        code = _SUPPRESSION * bool(row.suppress) | number << _PART_SHIFT | min(line, _LINE_MASK)
        first = seen.add(key, code)
        if first is not None:
            earlier = self._where(first)
            if first & _SUPPRESSION and row.suppress:
                return refuse(row.email_field, f"{row.email!r} duplicates {earlier}", "duplicate")
            if first & _SUPPRESSION:
                return refuse(
                    row.email_field,
                    f"{row.email!r} is suppressed at {earlier} of this import; not imported",
                    "duplicate",
                )
            if not row.suppress:
                return refuse(
                    row.email_field,
                    f"{row.email!r} duplicates {earlier} (addresses compare case-insensitively)",
                    "duplicate",
                )
        if row.suppress:
            return ImportedSuppression(key, row.suppress, origin, row.suppressed_at, row.detail)
        return Imported(Subscriber(envelope=envelope, name=name, line=line), _consent(origin, row))

    def _where(self, code: int) -> str:
        part = self._sources[(code >> _PART_SHIFT) & 0x3F].part.file
        line = code & _LINE_MASK
        where = f"line {line}" if line < _LINE_MASK else "an earlier line"
        return where if len(self._sources) == 1 else f"{part} {where}"


def _consent(origin: Origin, row: Row) -> Consent:
    return Consent(
        origin,
        subscribed_at=row.subscribed_at,
        subscribed_ip=row.subscribed_ip,
        confirmed_at=row.confirmed_at,
        confirmed_ip=row.confirmed_ip,
        evidence=row.evidence,
    )


def read_export(path: Path, tool: str | None = None, *, unsubscribed: bool = False) -> Export:
    """Open `path` (a CSV, or a ZIP of them) and read its headers now; iterate the result for
    its rows. `tool` (a FORMATS name) skips detection; `unsubscribed` makes every row a
    suppression (an export of unsubscribes whose rows do not say so)."""
    if tool is not None and tool not in FORMATS:
        raise ExportFileError(f"unknown format {tool!r} (known: {', '.join(FORMATS)})")
    shown = display_path(path)
    report = ImportReport()
    if not path.exists():
        raise ExportFileError(f"{shown}: no such file")
    if path.is_dir():
        raise ExportFileError(f"{shown}: is a folder; name the CSV or ZIP file in it")
    if not zipfile.is_zipfile(path):
        handle = _open_file(path, shown)
        source = _source(shown, handle, tool, report, required=True)
        assert source is not None
        return Export([source], report, unsubscribed)
    return _read_zip(path, shown, tool, report, unsubscribed)


def _read_zip(
    path: Path, shown: str, tool: str | None, report: ImportReport, unsubscribed: bool
) -> Export:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ExportFileError(f"{shown}: not a readable ZIP file ({exc})") from None
    sources: list[_Source] = []
    export = Export(sources, report, unsubscribed)
    export._zip = archive
    try:
        members = [
            m
            for m in archive.infolist()
            if not m.is_dir()
            and m.filename.lower().endswith(".csv")
            and "__MACOSX/" not in m.filename
        ]
        for member in members[:MAX_MEMBERS]:
            name = f"{shown}:{member.filename}"
            try:
                raw = archive.open(member)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError) as exc:
                report.skipped.append(f"{name}: cannot be read ({exc})")
                continue
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")
            source = _source(name, text, tool, report, required=False)
            if source is not None:
                sources.append(source)
        report.skipped.extend(
            f"{shown}:{m.filename}: not read (at most {MAX_MEMBERS} CSVs per ZIP)"
            for m in members[MAX_MEMBERS:]
        )
    except BaseException:
        export.close()
        raise
    if not sources:
        export.close()
        why = "; ".join(report.skipped) or "it holds no CSV file"
        raise ExportFileError(f"{shown}: nothing in this ZIP can be imported: {why}")
    return export


def _open_file(path: Path, shown: str) -> TextIO:
    try:
        return path.open(encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as exc:
        raise ExportFileError(f"{shown}: cannot read: {exc.strerror or exc}") from None


def _source(
    name: str, handle: TextIO, tool: str | None, report: ImportReport, *, required: bool
) -> _Source | None:
    """The CSV `handle` with its header read and its tool known; a file that cannot be imported
    raises ExportFileError (`required`) or is listed in report.skipped (a ZIP member)."""
    records = read_records(handle)
    try:
        header, chosen = _header(name, records, tool)
    except ExportFileError as exc:
        handle.close()
        if required:
            raise
        report.skipped.append(exc.message)
        return None
    except BaseException:
        handle.close()
        raise
    index: dict[str, int] = {}
    for at, cell in enumerate(header):
        index.setdefault(cell.strip().lower(), at)
    part = ExportFile(name, chosen.name, chosen.label, detected=tool is None)
    report.parts.append(part)
    return _Source(part, handle, records, header, index, chosen.mapper(frozenset(index)))


def _header(name: str, records: Records, tool: str | None) -> tuple[list[str], Format]:
    try:
        _, header = next(records, (1, None))
    except _DAMAGED as exc:
        raise ExportFileError(f"{name}: is damaged and cannot be read ({exc})") from None
    if isinstance(header, Unreadable):
        raise ExportFileError(f"{name}:1: the header row {header.reason}")
    if header is None or not any(cell.strip() for cell in header):
        raise ExportFileError(f"{name}: the file is empty; the first row must name the columns")
    if looks_like_utf16(",".join(header).encode("utf-8", "surrogateescape")):
        raise ExportFileError(f"{name} {UTF16}", hint=SAVE_AS_UTF8)
    if _UNDECODABLE.search("".join(header)):
        raise ExportFileError(f"{name}:1: the header row is not valid UTF-8")
    names = [cell.strip().lower() for cell in header]
    found = frozenset(names)
    shown = ", ".join(cell.strip() for cell in header)
    if len(shown) > 300:
        shown = shown[:300] + "..."
    guessed = detect(found)
    if tool is None:
        reason = unusable(found)
        if reason is not None:
            raise ExportFileError(f"{name}: {reason}")
        if guessed is None:
            raise ExportFileError(
                f"{name}: cannot tell which tool exported this file (its header: {shown}); "
                f"it needs an email column, or pass --format {'|'.join(FORMATS)}"
            )
        chosen = guessed
    else:
        chosen = FORMATS[tool]
    missing = [c for c in chosen.required if c not in found]
    if missing:
        looks = f"; it looks like a {guessed.label} export" if guessed and guessed != chosen else ""
        raise ExportFileError(
            f"{name}: a {chosen.label} export has the column(s) {', '.join(missing)}, "
            f"which this header lacks (its header: {shown}){looks}"
        )
    for column in chosen.required:
        if names.count(column) > 1:
            raise ExportFileError(f"{name}:1: column {column!r} appears twice in the header row")
    return header, chosen
