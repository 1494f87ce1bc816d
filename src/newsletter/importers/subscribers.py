"""A subscriber CSV in, a stream of valid Subscribers out, plus a report of every row left out.

Columns: ``email`` (required), ``name`` and ``status`` (``subscribed``/``unsubscribed``, blank means
subscribed) optional; any other column is ignored. The file is UTF-8 with
or without a BOM and must start with a header row.

Rows are read one at a time and nothing held grows with the list: the addresses seen, for the
duplicate check, are kept by seen.SeenKeys (a table of fixed size in memory, the rest in a
temporary file), so every reader (a send's planning, `check`, the `lists` commands, the preview)
reads a list of any length in the same memory. A bad row never stops the run: it is counted,
reported as ``path:line: field: reason``, and skipped. Duplicates (case-insensitive) keep the
first row and are each reported with the line they repeat. Unsubscribed rows and addresses in the
suppression container the caller passes in are skipped and counted, not reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TextIO

from email_validator import EmailNotValidError, validate_email

from newsletter.errors import Problem, SubscriberListError
from newsletter.formats.csvfile import Unreadable, read_records
from newsletter.formats.textfile import SAVE_AS_UTF8, UTF16, looks_like_utf16
from newsletter.importers.formats import FORMATS
from newsletter.importers.seen import SeenKeys
from newsletter.models import Subscriber, header_problem

MAX_NAME_LENGTH = 200
KEPT_REJECTIONS = 1000
_STATUSES = {"": True, "subscribed": True, "unsubscribed": False}
_UNDECODABLE = re.compile(r"[\udc80-\udcff]")
_RISKY = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\udc80-\udcff]|=\?")
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# RFC 5322 dot-atom: an address's local part here, a List-Id in mail/message.py.
DOT_ATOM = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*")

Reject = Callable[[Problem], None]


@dataclass
class ListReport:
    """What loading a list found. `rejected` keeps the first KEPT_REJECTIONS problems."""

    path: Path
    valid: int = 0
    duplicate: int = 0
    invalid: int = 0
    unsubscribed: int = 0
    suppressed: int = 0
    rejected: list[Problem] = field(default_factory=list)

    @property
    def rejected_count(self) -> int:
        return self.duplicate + self.invalid

    @property
    def rows(self) -> int:
        return self.valid + self.rejected_count + self.unsubscribed + self.suppressed

    def counts(self) -> dict[str, int]:
        return {
            "valid": self.valid,
            "duplicate": self.duplicate,
            "invalid": self.invalid,
            "unsubscribed": self.unsubscribed,
            "suppressed": self.suppressed,
        }

    def skipped_lines(self, shown: int = 20) -> list[str]:
        """The rows a send skipped as `send` and the worker's log say them: the first `shown`
        named, the rest counted."""
        lines = [f"skipped row: {problem}" for problem in self.rejected[:shown]]
        if self.rejected_count > shown:
            lines.append(f"... and {self.rejected_count - shown} more rows skipped")
        return lines


def fold_address(address: str) -> str:
    """An address already checked, folded for comparison: case and surrounding space do not
    make a new person. `address_key` gives the same form for an address not yet checked.

    The duplicate check, the outbox's rows and suppressions, Message-IDs and unsubscribe tokens
    all compare addresses in this form.
    """
    return address.strip().lower()


def address_key(address: str) -> str:
    """THE address key: any address checked, then ASCII (punycode domain) and folded as
    `fold_address` folds a checked one; raises ValueError with the reason if it is not valid.

    This is the key of the duplicate check, of the suppression container and of the address in
    unsubscribe tokens.
    """
    result = _ADDRESSES.check(address.strip())
    if isinstance(result, str):
        raise ValueError(result)
    return fold_address(result[1])


def check_list(
    path: Path, *, suppressed: Container[str] = frozenset(), on_reject: Reject | None = None
) -> ListReport:
    """Read the whole list for its report only (what `newsletter subscribers` prints)."""
    report = ListReport(path)
    for _ in read_subscribers(path, report, suppressed=suppressed, on_reject=on_reject):
        pass
    return report


def read_subscribers(
    path: Path,
    report: ListReport,
    *,
    suppressed: Container[str] = frozenset(),
    on_reject: Reject | None = None,
) -> Iterator[Subscriber]:
    """Open `path` and check its header now; then yield valid subscribers one row at a time.

    `report` is filled as the rows go by; `on_reject` sees every rejected row (also those beyond
    the ones the report keeps). Raises SubscriberListError when the file as a whole is unusable.
    """
    rows = read_rows(path, report, suppressed=suppressed, on_reject=on_reject)
    return (Subscriber(envelope=e, name=n, line=line) for e, n, line in rows)


class ListRow(NamedTuple):
    """A valid row as read, before it becomes a Subscriber (a send's planning streams these:
    building the validated model per row was a third of the cost of reading a large list)."""

    envelope: str
    name: str
    line: int


def read_rows(
    path: Path,
    report: ListReport,
    *,
    suppressed: Container[str] = frozenset(),
    on_reject: Reject | None = None,
) -> Iterator[ListRow]:
    """read_subscribers' rows as ListRow tuples, checked the same way."""
    handle = _open(path)
    records = read_records(handle)
    try:
        columns = _read_header(path, records)
    except BaseException:
        handle.close()
        raise
    return _rows(path, handle, records, columns, report, suppressed, on_reject)


def check_list_header(path: Path) -> None:
    """Raise SubscriberListError now if the file cannot be a list (missing, unreadable, no
    `email` column), without reading its rows: a send streams them later."""
    with _open(path) as handle:
        _read_header(path, read_records(handle))


def _open(path: Path) -> TextIO:
    try:
        return path.open(encoding="utf-8-sig", errors="surrogateescape", newline="")
    except FileNotFoundError:
        raise SubscriberListError(f"{path}: no such subscriber list") from None
    except OSError as exc:
        raise SubscriberListError(f"{path}: cannot read: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class _Columns:
    width: int
    email: int
    name: int  # == width when the column is absent: rows are padded with one empty cell
    status: int
    names: tuple[str, ...]


def _read_header(path: Path, records: Iterator[tuple[int, list[str] | Unreadable]]) -> _Columns:
    _, header = next(records, (1, None))
    if isinstance(header, Unreadable):
        raise SubscriberListError(f"{path}:1: the header row {header.reason}")
    if header is None or not any(cell.strip() for cell in header):
        raise SubscriberListError(f"{path}: the file is empty; the first row must name the columns")
    if looks_like_utf16(",".join(header).encode("utf-8", "surrogateescape")):
        raise SubscriberListError(f"{path} {UTF16}", hint=SAVE_AS_UTF8)
    names = [cell.strip().lower() for cell in header]
    if _UNDECODABLE.search("".join(names)):
        raise SubscriberListError(f"{path}:1: the header row is not valid UTF-8")
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise SubscriberListError(f"{path}:1: column {name!r} appears twice in the header row")
        seen.add(name)
    if "email" not in seen:
        raise SubscriberListError(
            f"{path}:1: the header row has no `email` column (found: {', '.join(header)})",
            hint=_export_hint(path, frozenset(seen)),
        )
    index = {name: i for i, name in enumerate(names) if name}
    return _Columns(
        width=len(names),
        email=index["email"],
        name=index.get("name", len(names)),
        status=index.get("status", len(names)),
        names=tuple(names),
    )


def _export_hint(path: Path, header: frozenset[str]) -> str | None:
    """How to take in another tool's export (Mailchimp's `Email Address` ...) whose header a
    list cannot read: `subscribers import` with that tool's format, which keeps its consent."""
    tool = next(
        (f for f in FORMATS.values() if f.name != "csv" and set(f.required) <= header), None
    )
    if tool is None:
        return None
    return (
        f"This looks like a {tool.label} export: import it into the outbox with `newsletter "
        f"subscribers import {path} --format {tool.name} --list LIST` (its consent is kept), "
        "or rename its address column to `email`."
    )


def _rows(
    path: Path,
    handle: TextIO,
    records: Iterator[tuple[int, list[str] | Unreadable]],
    columns: _Columns,
    report: ListReport,
    suppressed: Container[str],
    on_reject: Reject | None,
) -> Iterator[ListRow]:
    seen = SeenKeys()
    where = str(path)

    def reject(line: int, column: str, reason: str, *, duplicate: bool = False) -> None:
        if duplicate:
            report.duplicate += 1
        else:
            report.invalid += 1
        problem = Problem(where, line, column, reason)
        if len(report.rejected) < KEPT_REJECTIONS:
            report.rejected.append(problem)
        if on_reject is not None:
            on_reject(problem)

    width = columns.width
    email_at, name_at, status_at = columns.email, columns.name, columns.status
    pad = [""] * (width + 1)  # index `width` is an always-empty cell for absent columns

    with handle, seen:
        for start, row in records:
            if isinstance(row, Unreadable):
                field = row.field
                reject(
                    start,
                    columns.names[field] if field is not None and field < width else "",
                    row.reason,
                )
                continue
            joined = "".join(row)
            if not joined.strip():
                continue
            if len(row) > width:
                if "".join(row[width:]).strip():
                    reject(
                        start,
                        "",
                        f"has {len(row)} fields but the header has {width} "
                        '(put a value that contains a comma in double quotes: "Chen, Alice")',
                    )
                    continue
                del row[width:]
            row += pad[len(row) :]
            # Only spaces are trimmed: a stray line break or tab is a finding, not formatting.
            raw_email = row[email_at].strip(" ")
            name = row[name_at].strip(" ")
            # One search for the common case; the field-by-field checks only when it hits.
            if _RISKY.search(joined):
                problem = _row_problem(row, raw_email, name)
                if problem is not None:
                    reject(start, *problem)
                    continue
            if not raw_email:
                reject(start, "email", "is empty")
                continue
            checked = _ADDRESSES.check(raw_email)
            if isinstance(checked, str):
                reject(start, "email", f"{raw_email!r} is not a valid address: {checked}")
                continue
            _, envelope = checked
            if len(name) > MAX_NAME_LENGTH:
                reject(start, "name", f"is longer than {MAX_NAME_LENGTH} characters")
                continue
            status = row[status_at].strip(" ").lower()
            if status not in _STATUSES:
                reject(start, "status", f"is {status!r}; use subscribed or unsubscribed")
                continue
            key = fold_address(envelope)
            first = seen.add(key, start)
            if first is not None:
                reject(
                    start,
                    "email",
                    f"{raw_email!r} duplicates line {first} (addresses compare case-insensitively)",
                    duplicate=True,
                )
                continue
            if not _STATUSES[status]:
                report.unsubscribed += 1
                continue
            if key in suppressed:
                report.suppressed += 1
                continue
            report.valid += 1
            yield ListRow(envelope, name.strip(), start)  # stripped as the model would


def _row_problem(row: list[str], raw_email: str, name: str) -> tuple[str, str] | None:
    """(field, reason) for a row that is not UTF-8 or would put unsafe text in a header."""
    if _UNDECODABLE.search("".join(row)):
        return "", "is not valid UTF-8 (save the file as UTF-8)"
    # `=?...?=` is legal in a local part, and exactly what header injection uses.
    for column, value in (("email", raw_email), ("name", name)):
        problem = header_problem(value)
        if problem is not None:
            return column, problem
    return None


class Refusal(NamedTuple):
    """Why one entry cannot be a recipient: the field at fault and the reason."""

    field: str
    reason: str


def check_entry(raw_email: str, name: str) -> tuple[str, str] | Refusal:
    """(ASCII envelope address, name) for an address and name that a list row would accept,
    checked the same way and in the same order; else the Refusal a list row would get.
    For other tools' exports (importers/) and signups: one validation for every way in."""
    email, name = raw_email.strip(" "), name.strip(" ")
    problem = _row_problem([email, name], email, name)
    if problem is not None:
        return Refusal(*problem)
    if not email:
        return Refusal("email", "is empty")
    checked = _ADDRESSES.check(email)
    if isinstance(checked, str):
        return Refusal("email", f"{email!r} is not a valid address: {checked}")
    if len(name) > MAX_NAME_LENGTH:
        return Refusal("name", f"is longer than {MAX_NAME_LENGTH} characters")
    return checked[1], name.strip()


class _AddressChecker:
    """email-validator (syntax only, no DNS), with the domain half of its work cached.

    Validating the domain (IDNA, UTS-46) is two thirds of email-validator's cost and lists repeat a
    few domains. A plain dot-atom local part on a domain email-validator has already accepted gets
    the same result without asking again; everything else goes to email-validator in full.
    """

    MAX_DOMAINS = 10_000

    def __init__(self) -> None:
        self._domains: dict[str, tuple[str, str]] = {}

    def check(self, raw: str) -> tuple[str, str] | str:
        """(normalised address, ASCII envelope address), or the reason it is invalid."""
        local, at, domain = raw.rpartition("@")
        known = self._domains.get(domain) if at else None
        if (
            known is not None
            and len(local) <= 64
            and len(raw) <= 200
            and DOT_ATOM.fullmatch(local)
            and len(local) + 1 + len(known[1]) <= 254
        ):
            return f"{local}@{known[0]}", f"{local}@{known[1]}"
        try:
            result = validate_email(raw, check_deliverability=False, allow_smtputf8=False)
        except EmailNotValidError as exc:
            return str(exc)
        ascii_email = result.ascii_email or result.normalized
        if len(self._domains) >= self.MAX_DOMAINS:
            self._domains.clear()
        self._domains[domain] = (result.domain, result.ascii_domain)
        return result.normalized, ascii_email


_ADDRESSES = _AddressChecker()
