"""Test sends, one row per test: (issue, staging list) and the message's fingerprint in; each test's
number, time, fingerprint and outcome out.

The deliveries of (issue, list) hold the latest test. Beginning the next one records what the
latest did (recipients, sent, the other states counted) on its row, then restarts every delivery
of the send (deliveries.py: `pending` again, attempts and replies cleared, and the Message-ID
cleared so planning stores the new test's own: Gmail drops a repeated Message-ID as a
duplicate) and unshares its plan (plans.py), so the next worker plans it afresh.
The rows themselves stay: the same recipient keeps the same row id, so a late bounce of an
earlier test, whose VERP tag names that id, still lands on that reader of that list. Beginning
is a compare-and-set on the latest test's number, so two workers starting at once begin it once.

A log written before test sends repeated has deliveries and no row here: `latest` reads that
send as test 1 with no fingerprint, and `begin` writes its row before the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from newsletter.database.backend import Backend
from newsletter.database.deliveries import Deliveries
from newsletter.database.plans import Plans
from newsletter.database.records import now
from newsletter.models import DeliveryStatus

S = DeliveryStatus
_COLUMNS = "round, fingerprint, started_at, reason, sent, recipients, outcome"


@dataclass(frozen=True)
class TestSend:
    """One test of an issue to a staging list. `sent` and `recipients` are None for the latest
    test (its deliveries are the log's rows), set once the next test began."""

    __test__ = False  # not a pytest class

    round: int
    fingerprint: str  # empty: sent before fingerprints were kept
    started_at: str  # ISO 8601, UTC
    reason: str  # why it went out: "first", "changed", "again"
    sent: int | None = None
    recipients: int | None = None
    outcome: str = ""  # the other states, "1 rejected, 1 skipped"


class TestSends:
    __test__ = False

    def __init__(self, backend: Backend, deliveries: Deliveries, plans: Plans) -> None:
        self.backend = backend
        self._deliveries = deliveries
        self._plans = plans

    def history(self, issue: int, list_name: str) -> list[TestSend]:
        """Every test of the send, the first first (a log from before: its one test)."""
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM test_sends WHERE issue = ? AND list = ? ORDER BY round",
            (issue, list_name),
        )
        if rows:
            return [_test(row) for row in rows]
        legacy = self._legacy(issue, list_name)
        return [legacy] if legacy is not None else []

    def latest(self, issue: int, list_name: str) -> TestSend | None:
        tests = self.history(issue, list_name)
        return tests[-1] if tests else None

    def begin(
        self, issue: int, list_name: str, fingerprint: str, reason: str, *, after: int
    ) -> TestSend | None:
        """Test `after + 1`, if test `after` is still the latest (0: none yet); None if another
        run began one first. The latest test's outcome is recorded and its deliveries reopen."""
        stamp = now()
        with self.backend.transaction():
            ((latest,),) = self.backend.fetch(
                "SELECT coalesce(max(round), 0) FROM test_sends WHERE issue = ? AND list = ?",
                (issue, list_name),
            )
            if int(latest) == 0 and after == 1:
                legacy = self._legacy(issue, list_name)
                if legacy is not None:
                    self._insert(issue, list_name, legacy)
                    latest = 1
            if int(latest) != after:
                return None
            if after:
                self._close(issue, list_name, after)
                self._deliveries.restart(issue, list_name)
                # Every worker plans the new test afresh (a plan is shared only while current).
                self._plans.unshare(issue, list_name)
            begun = TestSend(after + 1, fingerprint, stamp, reason)
            self._insert(issue, list_name, begun)
            return begun

    def _close(self, issue: int, list_name: str, number: int) -> None:
        counts = self._deliveries.counts(issue, list_name)
        others = ", ".join(
            f"{counts[s]} {s}" for s in DeliveryStatus if s != S.SENT and counts.get(s)
        )
        self.backend.run(
            "UPDATE test_sends SET sent = ?, recipients = ?, outcome = ?"
            " WHERE issue = ? AND list = ? AND round = ?",
            (counts.get(S.SENT, 0), sum(counts.values()), others, issue, list_name, number),
        )

    def _insert(self, issue: int, list_name: str, test: TestSend) -> None:
        self.backend.run(
            f"INSERT INTO test_sends (issue, list, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                issue,
                list_name,
                test.round,
                test.fingerprint,
                test.started_at,
                test.reason,
                test.sent,
                test.recipients,
                test.outcome,
            ),
        )

    def _legacy(self, issue: int, list_name: str) -> TestSend | None:
        ((started,),) = self.backend.fetch(
            "SELECT min(created_at) FROM deliveries WHERE issue = ? AND list = ?",
            (issue, list_name),
        )
        return TestSend(1, "", str(started), "first") if started else None


def _test(row: tuple[object, ...]) -> TestSend:
    number, fingerprint, started, reason, sent, recipients, outcome = row
    return TestSend(
        int(str(number)),
        str(fingerprint),
        str(started),
        str(reason),
        None if sent is None else int(str(sent)),
        None if recipients is None else int(str(recipients)),
        str(outcome),
    )
