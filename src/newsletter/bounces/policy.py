"""A classified Report in, the outbox rows it is about and who is suppressed out; and the rates
at which a send stops.

Matching, most trusted first: a VERP tag that verifies with NEWSLETTER_SECRET (from the return
path, Delivered-To or the quoted X-Newsletter-Tag header), else a quoted Message-ID the outbox
holds. A report that matches no row suppresses no one: it stays in the mailbox and is counted.

The policy ([bounces] in newsletter.toml):

    hard bounce (5.x.x, or 550 5.1.1 at send time)   suppressed at once, reason `bounced`
    complaint (ARF abuse, fraud, virus, other)       suppressed at once, reason `complained`
    soft bounce (4.x.x, mailbox full, policy)        suppressed after `soft_limit` issues in a
                                                     row bounced (default 3), reason `bounced`
    delayed, auto-reply                              recorded, never counted

A send stops (exit 4, resumable) once its attempts reach `min_sample` and its hard bounces
pass `max_hard_rate` (5 %) or its complaints pass `max_complaint_rate` (0.1 %).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from newsletter.bounces.kinds import Kind, find_status, kind_of, worst
from newsletter.bounces.reports import Finding, Report
from newsletter.bounces.verp import read_tag
from newsletter.outbox import Delivery, Outbox
from newsletter.outbox.records import BOUNCED, COMPLAINED, now
from newsletter.settings import BouncesSettings

SMTP_SOURCE = "smtp"


class Verdict(StrEnum):
    """What became of one mail from the bounce mailbox."""

    HARD = "hard"
    SOFT = "soft"
    COMPLAINT = "complaint"
    DELAYED = "delayed"
    AUTO_REPLY = "auto-reply"
    REPEATED = "already counted"
    UNMATCHED = "no matching send"
    UNKNOWN = "not understood"

    @property
    def filed(self) -> bool:
        """Understood and ours: the mail is moved (or flagged); the rest stay untouched."""
        return self not in (Verdict.UNMATCHED, Verdict.UNKNOWN)


@dataclass(frozen=True)
class Suppressed:
    list: str
    address: str
    reason: str
    issue: int


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    rows: tuple[Delivery, ...] = ()
    finding: Finding | None = None
    suppressed: tuple[Suppressed, ...] = ()


class Policy:
    """Applies reports to one outbox. `secrets`: NEWSLETTER_SECRET and its previous values (a
    tag signed before a rotation still matches); without any only Message-IDs can match."""

    def __init__(
        self, outbox: Outbox, config: BouncesSettings, secrets: Sequence[bytes] = ()
    ) -> None:
        self.outbox = outbox
        self.config = config
        self.secrets = tuple(secrets)

    def match(self, report: Report) -> list[Delivery]:
        ids = {read_tag(s, tag) for s in self.secrets for tag in report.tags} - {None}
        rows = self.outbox.deliveries_by_id(i for i in ids if i is not None)
        return rows or self.outbox.deliveries_by_message_id(report.message_ids)

    def apply(self, report: Report) -> Decision:
        """Record `report` against its rows and suppress whom the policy says."""
        if not report.understood:
            return Decision(Verdict.UNKNOWN)
        rows = self.match(report)
        if not rows:
            return Decision(Verdict.UNMATCHED)
        fresh = False
        suppressed: list[Suppressed] = []
        finding = None
        for row in rows:
            finding = _finding_for(report, row)
            if not self.outbox.record_bounce(
                report.key,
                row.id,
                finding.kind.value,
                finding.status,
                finding.diagnostic,
                report.source,
            ):
                continue
            fresh = True
            suppressed += self._suppress(row, finding.kind)
        if not fresh:
            return Decision(Verdict.REPEATED, tuple(rows), finding)
        return Decision(Verdict(report.kind.value), tuple(rows), finding, tuple(suppressed))

    def refused(self, row: Delivery, code: int, reply: str) -> Suppressed | None:
        """A 5xx for this recipient at send time is a bounce too: record it (once per row) and
        suppress the address when the code says it is dead (550 5.1.1, not 5.7.1 policy)."""
        status = find_status(f"{code} {reply}")
        kind = kind_of(status) or Kind.HARD
        key = f"{SMTP_SOURCE}:{row.id}"
        if not self.outbox.record_bounce(key, row.id, kind.value, status, reply, SMTP_SOURCE):
            return None
        found = self._suppress(row, kind)
        return found[0] if found else None

    def _suppress(self, row: Delivery, kind: Kind) -> list[Suppressed]:
        reason = None
        if kind is Kind.COMPLAINT:
            reason = COMPLAINED
        elif kind is Kind.HARD or (
            kind is Kind.SOFT
            and self.outbox.soft_streak(row.list, row.recipient, row.issue)
            >= self.config.soft_limit
        ):
            reason = BOUNCED
        if reason is None or not self.outbox.suppress(row.list, row.recipient, reason):
            return []
        return [Suppressed(row.list, row.recipient, reason, row.issue)]


class RateGuard:
    """One run's watch on the rates. Counts come from the log (so every worker process, and a
    `newsletter bounces` running meanwhile, count), read at most every 0.25 s after a refusal
    and every 2 s otherwise, and never more often than keeps the reading under 5 % of the run
    (counting a million-row list takes a while)."""

    def __init__(self, outbox: Outbox, config: BouncesSettings, issue: int, list_name: str) -> None:
        self.outbox, self.config, self.issue, self.list_name = outbox, config, issue, list_name
        self.since = now()
        self._last = -1e9
        self._cost = 0.0
        self._answers = 0

    def check(self, *, rejected: bool) -> str | None:
        """Why the run must stop now (see `breach`), or None. Called once per answer; reads
        nothing before this process alone has `min_sample` answers (no rate can be judged)."""
        self._answers += 1
        moment = time.monotonic()
        if self._answers < self.config.min_sample:
            return None
        if moment - self._last < max(0.25 if rejected else 2.0, 20 * self._cost):
            return None
        totals = self.outbox.run_totals(self.issue, self.list_name, self.since)
        self._last = time.monotonic()
        self._cost = self._last - moment
        return breach(self.config, *totals)


def breach(config: BouncesSettings, attempted: int, hard: int, complaints: int) -> str | None:
    """Why a send must stop now, or None: rates only apply from `min_sample` attempts on."""
    if attempted < max(config.min_sample, 1):
        return None
    if hard / attempted > config.max_hard_rate:
        return (
            f"hard bounces are at {hard / attempted:.1%} of {attempted} messages"
            f" (limit {config.max_hard_rate:.1%})"
        )
    if complaints / attempted > config.max_complaint_rate:
        return (
            f"complaints are at {complaints / attempted:.2%} of {attempted} messages"
            f" (limit {config.max_complaint_rate:.2%})"
        )
    return None


def _finding_for(report: Report, row: Delivery) -> Finding:
    """The finding about this row's recipient; when none names it (forwarded, redacted), the
    worst of the report's (with VERP the report is about this one message anyway)."""
    named = [f for f in report.findings if f.address == row.recipient]
    pool = named or list(report.findings)
    if not pool:
        return Finding(row.recipient, report.kind)
    kind = worst([f.kind for f in pool])
    return next(f for f in pool if f.kind is kind)
