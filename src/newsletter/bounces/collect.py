"""The bounce mailbox in, a Tally out: each mail read, classified, applied to the outbox, and
moved (or flagged) only when it was understood, matched a send and was not held for review.

This is `newsletter bounces`: one pass over the mailbox, one line per mail through `report`,
counts that add up to the number of mails read. Each mail is judged on its own: one that cannot
be parsed is "not understood" and left where it was, and the run goes on to the next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from newsletter.bounces.inbox import Inbox
from newsletter.bounces.policy import Decision, Policy, Suppressed, Verdict
from newsletter.bounces.reports import Report, read_report


@dataclass
class Tally:
    read: int = 0
    verdicts: Counter[Verdict] = field(default_factory=Counter)
    suppressed: list[Suppressed] = field(default_factory=list)

    @property
    def left(self) -> int:
        """Mails left where they were (not understood, or not about any send of ours)."""
        return sum(n for v, n in self.verdicts.items() if not v.filed)


def collect(
    inbox: Inbox, policy: Policy, report: Callable[[Report, Decision], None] | None = None
) -> Tally:
    """Read every mail of `inbox` once and apply it; see the module docstring."""
    tally = Tally()
    for mail in inbox.mails():
        parsed = read_report(mail.raw)
        decision = policy.apply(parsed, mail.raw)
        tally.read += 1
        tally.verdicts[decision.verdict] += 1
        tally.suppressed += decision.suppressed
        if decision.verdict.filed:
            inbox.file(mail)
        if report is not None:
            report(parsed, decision)
    return tally


def describe_decision(report: Report, decision: Decision) -> str:
    """One line per mail: verdict, whom it is about, the status, what was done (or why not)."""
    verdict = decision.verdict
    if not decision.rows:
        label = verdict.value if not report.understood else f"{report.kind.value} ({verdict.value})"
        why = f": {report.problem}" if report.problem else ""
        return f"{label:<16} from {report.sender[:40]} {report.subject[:60]!r}{why}"
    row = decision.rows[0]
    finding = decision.finding
    status = finding.status if finding and finding.status else "-"
    done = "; ".join(f"suppressed on {s.list} ({s.reason})" for s in decision.suppressed)
    if verdict is Verdict.HELD and finding is not None:
        done = f"{finding.kind.value} not applied: {decision.held[:200]}"
    return f"{verdict.value:<16} {row.recipient} issue {row.issue} list {row.list} {status}" + (
        f": {done}" if done else ""
    )
