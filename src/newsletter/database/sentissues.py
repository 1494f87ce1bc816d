"""What an issue went to a real list as: an issue, a list, the send's moment, the message's
fingerprint and what readers got (a JSON object the caller shapes) in; the record out.

The first send of an issue to a list is kept, whatever comes after: a re-run of a stopped send
or a later edit never replaces what the first readers have (a re-run after an edit sends the
rest the new text, and `check` says so before it does).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from newsletter.database.backend import Backend


@dataclass(frozen=True)
class SentIssue:
    issue: int
    list_name: str
    sent_at: dt.datetime  # UTC: when the send that first carried it started
    fingerprint: str  # gate.fingerprint of the sample message: equal, the same email
    version: dict[str, Any]  # what readers got, as the sender recorded it


class SentIssues:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def record(
        self,
        issue: int,
        list_name: str,
        fingerprint: str,
        version: dict[str, Any],
        *,
        now: dt.datetime | None = None,
    ) -> bool:
        """Keep what issue `issue` goes to `list_name` as, unless a send already did; whether
        this one was kept."""
        stamp = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat()
        text = json.dumps(version, ensure_ascii=False, sort_keys=True)
        with self.backend.transaction():
            before = self.backend.fetch(
                "SELECT 1 FROM sent_issues WHERE issue = ? AND list = ?", (issue, list_name)
            )
            self.backend.run(
                "INSERT INTO sent_issues (issue, list, sent_at, fingerprint, version)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (issue, list_name, stamp, fingerprint, text),
            )
        return not before

    def of(self, issue: int) -> list[SentIssue]:
        """Every real list issue `issue` went to, first sent first."""
        rows = self.backend.fetch(
            "SELECT issue, list, sent_at, fingerprint, version FROM sent_issues"
            " WHERE issue = ? ORDER BY sent_at, list",
            (issue,),
        )
        return [
            SentIssue(
                int(number),
                str(name),
                dt.datetime.fromisoformat(str(stamp)),
                str(print_),
                json.loads(str(version)),
            )
            for number, name, stamp, print_, version in rows
        ]
