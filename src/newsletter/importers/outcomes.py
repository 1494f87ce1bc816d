"""What one row of another tool's export becomes, as plain values: a subscriber with the consent
the tool recorded, a suppression, or a refused row with its line and reason.

These are all the importer hands on: the caller decides where they go (the outbox's subscribers,
consent ledger and suppressions), so reading an export needs no database and a test needs none.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from newsletter.errors import Problem
from newsletter.models import Subscriber

KEPT_PROBLEMS = 1000

# Why a row was not imported: a bad value, an address seen earlier in the same import, a person
# the tool says never confirmed, or one who asked the tool to erase them.
RefusalKind = Literal["invalid", "duplicate", "unconfirmed", "erased"]


@dataclass(frozen=True)
class Origin:
    """Where a row came from: the tool, the file as the editor named it (and the ZIP member),
    and the line its record starts on."""

    tool: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Consent:
    """How the person agreed to be mailed, as the tool recorded it (what GDPR Art. 7(1) asks a
    sender to be able to show). Times are UTC. `evidence` keeps the export's own consent columns
    verbatim, (header, value) in file order, so nothing the tool said is lost, not even a value
    that did not parse."""

    origin: Origin
    subscribed_at: dt.datetime | None = None
    subscribed_ip: str | None = None
    confirmed_at: dt.datetime | None = None
    confirmed_ip: str | None = None
    evidence: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Imported:
    """A person to mail: the checked address and name, and their consent record."""

    subscriber: Subscriber
    consent: Consent


@dataclass(frozen=True)
class ImportedSuppression:
    """A person never to mail: the address key, why (in the tool's own word: unsubscribed,
    cleaned, email disabled, blocklisted, ...), since when, and what else the tool said."""

    address: str
    reason: str
    origin: Origin
    at: dt.datetime | None = None
    detail: str = ""


@dataclass(frozen=True)
class Refused:
    """A row that is neither: `problem` says where and why, in the form the lists report."""

    problem: Problem
    kind: RefusalKind


Outcome = Imported | ImportedSuppression | Refused


@dataclass(frozen=True)
class ExportFile:
    """One CSV read: the file (a ZIP member is `zip:member`), the tool, and whether the tool
    was read from the header (True) or given with --format (False)."""

    file: str
    tool: str
    label: str
    detected: bool

    def describe(self) -> str:
        how = "detected from its header" if self.detected else "as --format said"
        return f"{self.file}: {self.label} export ({how})"


@dataclass
class ImportReport:
    """The counts of one import, filled as its rows go by; `rows` is every row read, so
    imported + suppressed + refused always adds up to it. `warnings` are values kept verbatim
    in the consent record because they did not parse (a time, an IP); the row was imported."""

    parts: list[ExportFile] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ZIP members that are no export, and why
    imported: int = 0
    suppressed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)  # the first KEPT_PROBLEMS refusals
    warnings: list[Problem] = field(default_factory=list)  # the first KEPT_PROBLEMS
    warning_count: int = 0

    @property
    def refused_count(self) -> int:
        return sum(self.refused.values())

    @property
    def rows(self) -> int:
        return self.imported + self.suppressed + self.refused_count

    def count(self, outcome: Outcome) -> None:
        if isinstance(outcome, Imported):
            self.imported += 1
        elif isinstance(outcome, ImportedSuppression):
            self.suppressed += 1
        else:
            self.refused[outcome.kind] += 1
            if len(self.problems) < KEPT_PROBLEMS:
                self.problems.append(outcome.problem)

    def warn(self, problem: Problem) -> None:
        self.warning_count += 1
        if len(self.warnings) < KEPT_PROBLEMS:
            self.warnings.append(problem)
