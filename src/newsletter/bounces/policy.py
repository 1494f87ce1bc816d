"""A classified Report in, the one outbox row it is about and who is suppressed out; and the
rates at which a send stops.

Matching, most trusted first: a VERP tag that verifies with NEWSLETTER_SECRET (from the return
path, Delivered-To or the quoted X-Newsletter-Tag header), else a quoted Message-ID the outbox
holds (the first of the first MAX_CANDIDATES quoted that does). A report that matches no row
suppresses no one: it stays in the mailbox and is counted. One mail acts on at most one row,
however many tags or Message-IDs it quotes.

A verified tag proves the report is about that message. A Message-ID does not: anyone who saw
the message (or a reply quoting it) can write one. So a hard or soft bounce or a complaint
matched only by Message-ID must also prove where it comes from (origin.py: the reader's own
address, or the mail system or feedback loop of the reader's provider, DKIM-signed), and must
not name another recipient; otherwise it is held for review: recorded in held_reports, left in
the mailbox, counted, listed by `newsletter bounces --held`, and applied only if the editor
accepts it (`--accept ID`; `--dismiss ID` files it without effect). Delays and auto-replies
change nothing, so they are recorded on a Message-ID alone. A provider's event (`envelope`: it
names the address the relay was handed) whose recipient is not the tagged row's is held too: an
old tag naming a new row (the outbox deleted, the secret kept) acts on nothing.

A row whose person was erased (`subscribers forget`) keeps nothing that names them: a report
about it records only its kind and status (tagged), is never held, and suppresses no one.

The policy ([bounces] in newsletter.toml):

    hard bounce (5.x.x, or 550 5.1.1 at send time)   suppressed at once, reason `bounced`
    (a refusal at send time about the message: content, protocol, system, a bare code other
    than 550/551/553 to RCPT: no bounce at all; send/replies.py fails the row instead)
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
from typing import TYPE_CHECKING

from newsletter.bounces.kinds import Kind, find_status, kind_of, unsure_of_the_address, worst
from newsletter.bounces.reports import Diagnosis, Report
from newsletter.bounces.verp import read_tag
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database, Delivery
from newsletter.database.bounces import ACCEPTED, DISMISSED, HELD, HeldReport
from newsletter.database.deliveries import FORGOTTEN
from newsletter.database.records import BOUNCED, COMPLAINED, now

if TYPE_CHECKING:
    from newsletter.bounces.origin import DkimKeys, Proof

SMTP_SOURCE = "smtp"
# Tags and Message-IDs looked at per mail: a mail quoting thousands costs no more than this.
MAX_CANDIDATES = 20


class Verdict(StrEnum):
    """What became of one mail from the bounce mailbox."""

    HARD = "hard"
    SOFT = "soft"
    COMPLAINT = "complaint"
    DELAYED = "delayed"
    AUTO_REPLY = "auto-reply"
    REPEATED = "already counted"
    DISMISSED = "dismissed"
    HELD = "held for review"
    UNMATCHED = "no matching send"
    ERASED = "about a person erased on request"
    UNKNOWN = "not understood"

    @property
    def filed(self) -> bool:
        """Understood, ours and settled: the mail is moved (or flagged); the rest stay."""
        return self not in (Verdict.HELD, Verdict.UNMATCHED, Verdict.UNKNOWN)


@dataclass(frozen=True)
class Suppressed:
    list: str
    address: str
    reason: str
    issue: int


@dataclass(frozen=True)
class Match:
    """The one row a report is about, and whether a verified tag (not a Message-ID) says so."""

    row: Delivery
    by_tag: bool


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    rows: tuple[Delivery, ...] = ()
    finding: Diagnosis | None = None
    suppressed: tuple[Suppressed, ...] = ()
    held: str = ""  # why the report was held for review


class Policy:
    """Applies reports to one outbox. `secrets`: NEWSLETTER_SECRET and its previous values (a
    tag signed before a rotation still matches); without any only Message-IDs can match.
    `keys` looks up DKIM keys to prove a sender; without it no report matched by Message-ID
    alone is acted on (each is held)."""

    def __init__(
        self,
        database: Database,
        config: BouncesSettings,
        secrets: Sequence[bytes] = (),
        keys: DkimKeys | None = None,
    ) -> None:
        self.database = database
        self.config = config
        self.secrets = tuple(secrets)
        self.keys = keys

    def match(self, report: Report) -> Match | None:
        """The row of the first tag that verifies, else of the first quoted Message-ID held."""
        for tag in report.tags[:MAX_CANDIDATES]:
            for secret in self.secrets:
                ident = read_tag(secret, tag)
                rows = self.database.deliveries.by_id([ident]) if ident is not None else []
                if rows:
                    return Match(rows[0], by_tag=True)
        candidates = report.message_ids[:MAX_CANDIDATES]
        found = {r.message_id: r for r in self.database.deliveries.by_message_id(candidates)}
        for message_id in candidates:
            if message_id in found:
                return Match(found[message_id], by_tag=False)
        return None

    def apply(self, report: Report, raw: bytes = b"") -> Decision:
        """Record `report` (the mail `raw`, for proving its sender) against its row and
        suppress whom the policy says, or hold it for review."""
        if not report.understood:
            return Decision(Verdict.UNKNOWN)
        match = self.match(report)
        if match is None:
            return Decision(Verdict.UNMATCHED)
        row = match.row
        finding = _finding_for(report, row)
        if row.recipient.startswith(FORGOTTEN):
            return self._erased(report, row, finding, by_tag=match.by_tag)
        # A relay's event names the very address it was handed: a tag on another's row is an
        # old tag naming a new row (the outbox deleted, the secret kept), not a forward.
        stranger = _stranger(report, row, by_tag=True) if match.by_tag and report.envelope else ""
        if not stranger and (match.by_tag or not finding.kind.counts):
            return self._record(report, row, finding)
        before = self.database.bounces.held_by_report(report.key, row.id)
        if before is not None and before.state == DISMISSED:
            return Decision(Verdict.DISMISSED, (row,), finding)
        if before is not None and before.state == ACCEPTED:
            return self._record(report, row, finding)  # recorded when accepted: "already"
        sender, why = report.sender, stranger
        if not stranger:
            proof = self._prove(report, row, raw)
            if proof.proven:
                if before is not None:  # held on an earlier run (its key server did not answer)
                    self.database.bounces.decide(before.id, ACCEPTED)
                return self._record(report, row, finding)
            sender, why = proof.sender or report.sender, proof.why
        if before is None:
            self.database.bounces.hold(
                report.key,
                row.id,
                finding.kind.value,
                finding.status,
                finding.diagnostic,
                report.source,
                sender,
                why,
            )
        return Decision(Verdict.HELD, (row,), finding, held=why)

    def accept(self, held_id: int) -> tuple[HeldReport, list[Suppressed]] | None:
        """Apply a held report as if it were proven (the editor looked at it): record it and
        suppress by the policy. None if no report with this id is held. Each step is safe to
        repeat, so an accept cut short is finished by the next."""
        held = self.database.bounces.held_report(held_id)
        if held is None or held.state != HELD:
            return None
        row = held.delivery
        with self.database.backend.transaction():
            self.database.bounces.record(
                held.report, row.id, held.kind, held.status, held.detail, held.source
            )
            suppressed = self._suppress(row, Kind(held.kind))
            self.database.bounces.decide(held.id, ACCEPTED)
        return held, suppressed

    def refused(self, row: Delivery, code: int, reply: str) -> Suppressed | None:
        """A 5xx for this recipient at send time is a bounce too: record it (once per row) and
        suppress the address when the code says it is dead (550 5.1.1, not 5.7.1 policy). A
        bare 550 to RCPT, or a 5.3.x or 5.5.x there, is soft (`unsure_of_the_address`): after
        `soft_limit` issues in a row it suppresses, one alone does not."""
        status = find_status(f"{code} {reply}")
        unsure = unsure_of_the_address(reply)
        kind = Kind.SOFT if unsure else (kind_of(status) or Kind.HARD)
        key = f"{SMTP_SOURCE}:{row.id}"
        with self.database.backend.transaction():
            if not self.database.bounces.record(
                key, row.id, kind.value, status, reply, SMTP_SOURCE
            ):
                return None
            found = self._suppress(row, kind)
        return found[0] if found else None

    def _prove(self, report: Report, row: Delivery, raw: bytes) -> Proof:
        """Whether a report matched by Message-ID alone may act on `row`."""
        # dkimpy and the DNS library load only here: a send uses this module for its rate
        # guard and its refusals, and never proves a sender.
        from newsletter.bounces.origin import Proof, prove

        why = _stranger(report, row)
        return Proof(False, "", why) if why else prove(raw, row.recipient, self.keys)

    def _erased(
        self, report: Report, row: Delivery, finding: Diagnosis, *, by_tag: bool
    ) -> Decision:
        """A report about a row whose person was erased (GDPR Art. 17) stores nothing that names
        them: a tagged one only its kind and status (the send's counts), no text; one matched by
        Message-ID alone is not held (the editor would read about them), and nobody is
        suppressed (the forgotten hash already keeps them from being mailed)."""
        if by_tag and finding.kind.counts:
            kept = self.database.bounces.record(
                report.key, row.id, finding.kind.value, finding.status, "", report.source
            )
            if not kept:
                return Decision(Verdict.REPEATED, (row,))
        return Decision(Verdict.ERASED, (row,))

    def _record(self, report: Report, row: Delivery, finding: Diagnosis) -> Decision:
        # The record is the report's claim ("already counted" next time): it and the
        # suppression it leads to commit together, or a kill between them loses the suppression.
        with self.database.backend.transaction():
            if not self.database.bounces.record(
                report.key,
                row.id,
                finding.kind.value,
                finding.status,
                finding.diagnostic,
                report.source,
            ):
                return Decision(Verdict.REPEATED, (row,), finding)
            suppressed = tuple(self._suppress(row, finding.kind))
        return Decision(Verdict(finding.kind.value), (row,), finding, suppressed)

    def _suppress(self, row: Delivery, kind: Kind) -> list[Suppressed]:
        reason = None
        if kind is Kind.COMPLAINT:
            reason = COMPLAINED
        elif kind is Kind.HARD or (
            kind is Kind.SOFT
            and self.database.bounces.soft_streak(row.list, row.recipient, row.issue)
            >= self.config.soft_limit
        ):
            reason = BOUNCED
        if reason is None or not self.database.suppressions.add(row.list, row.recipient, reason):
            return []
        return [Suppressed(row.list, row.recipient, reason, row.issue)]


class RateGuard:
    """One run's watch on the rates. Counts come from the log (so every worker process, and a
    `newsletter bounces` running meanwhile, count), read at most every 0.25 s after a refusal
    and every 2 s otherwise, and never more often than keeps the reading under 5 % of the run
    (counting a million-row list takes a while)."""

    def __init__(
        self, database: Database, config: BouncesSettings, issue: int, list_name: str
    ) -> None:
        self.database, self.config, self.issue, self.list_name = database, config, issue, list_name
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
        totals = self.database.bounces.run_totals(self.issue, self.list_name, self.since)
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


def _stranger(report: Report, row: Delivery, *, by_tag: bool = False) -> str:
    """Why `report` is about someone other than the row's recipient, or "" when it is not (it
    names them, or names nobody). `by_tag`: the row is the one its tag names."""
    named = [f.address for f in report.findings if f.address]
    if not named or row.recipient in named:
        return ""
    if by_tag:  # a provider's event quotes no message: the tag it echoed named the row
        return (
            f"it is about {named[0]}, but its tag names the message to {row.recipient}"
            " (a tag of an outbox since replaced, or of a newsletter sharing the secret)"
        )
    return f"it is about {named[0]}, but the message it quotes went to {row.recipient}"


def _finding_for(report: Report, row: Delivery) -> Diagnosis:
    """The finding about this row's recipient; when none names it (forwarded, redacted), the
    worst of the report's (with VERP the report is about this one message anyway)."""
    named = [f for f in report.findings if f.address == row.recipient]
    pool = named or list(report.findings)
    if not pool:
        return Diagnosis(row.recipient, report.kind)
    kind = worst([f.kind for f in pool])
    return next(f for f in pool if f.kind is kind)
