"""Subject tests: (issue, list) in; the test's subjects, sample, decision time and, once decided,
the winner and the figures behind it, out. One test per send, recorded before its first message."""

from __future__ import annotations

import json
from dataclasses import dataclass

from newsletter.database.backend import Backend
from newsletter.database.records import now


@dataclass(frozen=True)
class SubjectTest:
    issue: int
    list: str
    subjects: tuple[str, ...]
    sample: float  # the share of the list in the sample, 0 < sample <= 1
    decide_at: float  # Unix seconds
    state: str  # 'sampling', then 'decided'
    winner: int | None
    detail: str  # the decision's figures, as the report shows them


class SubjectTests:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def get(self, issue: int, list_name: str) -> SubjectTest | None:
        found = self.backend.fetch(
            "SELECT subjects, sample, decide_at, state, winner, detail FROM subject_tests"
            " WHERE issue = ? AND list = ?",
            (issue, list_name),
        )
        if not found:
            return None
        subjects, sample, decide_at, state, winner, detail = found[0]
        return SubjectTest(
            issue,
            list_name,
            tuple(json.loads(subjects)),
            float(sample),
            float(decide_at),
            str(state),
            None if winner is None else int(winner),
            str(detail),
        )

    def begin(
        self, issue: int, list_name: str, subjects: tuple[str, ...], sample: float, decide_at: float
    ) -> bool:
        """The test recorded; False if the send has one already (it keeps its own)."""
        return (
            self.backend.run(
                "INSERT INTO subject_tests (issue, list, subjects, sample, decide_at, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (issue, list) DO NOTHING",
                (issue, list_name, json.dumps(subjects), sample, decide_at, now()),
            )
            == 1
        )

    def decide(self, issue: int, list_name: str, winner: int, detail: str) -> SubjectTest:
        """The decision, made once: a second decider keeps the first's (returned)."""
        self.backend.run(
            "UPDATE subject_tests SET state = 'decided', winner = ?, detail = ?, decided_at = ?"
            " WHERE issue = ? AND list = ? AND state = 'sampling'",
            (winner, detail, now(), issue, list_name),
        )
        found = self.get(issue, list_name)
        assert found is not None
        return found
