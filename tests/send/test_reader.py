"""The list read beside planning, on each backend: a list longer than the duplicate check's table
in memory (so most addresses it has seen are on disk) still has every duplicate reported with
the line it repeats, the first row kept, and counts that add up with the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.database import Database
from newsletter.importers.seen import SeenKeys
from newsletter.send.job import Job
from newsletter.send.planning import plan
from send.test_engine import build
from support.database import CsvListing

N = 600


def write(path: Path) -> None:
    rows = [f"r{i}@example.com,Reader {i},{'unsubscribed' if i == 10 else ''}" for i in range(N)]
    rows += [
        "r10@example.com,Back again,subscribed",  # line 602: the first row (unsubscribed) wins
        "R5@EXAMPLE.COM,Again,",  # line 603: a repeat of line 7, long written to disk
        "r599@example.com,Again,",  # line 604: a repeat of line 601, still in memory
        "r5@example.com,Thrice,",  # line 605
        "not-an-address,,",  # line 606
    ]
    path.write_text("email,name,status\n" + "\n".join(rows) + "\n", encoding="utf-8")


def test_duplicates_past_the_table_are_reported_and_counted(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SeenKeys, "TABLE", 64)  # a run every 32 addresses (the reader forks)
    path = tmp_path / "list.csv"
    write(path)
    job = Job(14, "main", CsvListing(path), build)
    with database.plans.lock(14, "main"):
        planned, report = plan(job, database, "planner", keep=lambda: None)
    assert report is not None

    reasons = [str(p).removeprefix(f"{path}:") for p in report.rejected]
    assert reasons == [
        "602: email: 'r10@example.com' duplicates line 12 (addresses compare case-insensitively)",
        "603: email: 'R5@EXAMPLE.COM' duplicates line 7 (addresses compare case-insensitively)",
        "604: email: 'r599@example.com' duplicates line 601 (addresses compare case-insensitively)",
        "605: email: 'r5@example.com' duplicates line 7 (addresses compare case-insensitively)",
        "606: email: 'not-an-address' is not a valid address:"
        " An email address must have an @-sign.",
    ]
    assert report.counts() == {
        "valid": N - 1,
        "duplicate": 4,
        "invalid": 1,
        "unsubscribed": 1,
        "suppressed": 0,
    }
    assert report.rows == N + 5  # every row after the header, once
    assert planned is not None
    assert planned.total == planned.added == report.valid
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    assert len(rows) == report.valid
    assert "r10@example.com" not in rows  # unsubscribed on its first row
    assert (rows["r5@example.com"].name, rows["r599@example.com"].name) == (
        "Reader 5",
        "Reader 599",
    )
