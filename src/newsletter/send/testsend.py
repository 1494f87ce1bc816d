"""Whether a test send goes out again: the latest test of (issue, staging list), the log's counts
and this render's fingerprint in; a TestDecision out (resume it, begin the next, or send nothing).

A send to a real list happens once (the delivery log's UNIQUE key); a test is sent to look at
it, so it goes out again whenever the rendered message changed since the latest test, and on
`--again` even when it did not. A test that has not finished (a run killed, or deferred rows) is
resumed by a re-run of the same message, never begun anew: the kill tests hold for tests too.
An unchanged, finished test sends nothing and says when it went and to how many.

The fingerprint is gate.py's (the rendered message, before any reader's values).
`decide` is the rule, a pure function; `consider` reads the log for it (read only: a first test
creates no log); `begin` makes the decision true under the send lock, as the run starts (the
coordinator's first step for a test).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from newsletter.database import Database
from newsletter.database.testsends import TestSend
from newsletter.days import date_of, zone_named
from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus

S = DeliveryStatus
UNFINISHED = (S.PENDING, S.DEFERRED, S.SENDING)


@dataclass(frozen=True)
class TestDecision:
    """What this run does with the test. `round` is the test it sends (or, when `go` is False,
    the latest one); `begin` says it is a new test, begun after `after`."""

    __test__ = False

    go: bool
    round: int
    begin: bool
    after: int
    fingerprint: str
    reason: str  # "first", "changed", "again", "resume", "unchanged"
    message: str  # what to tell the editor


def decide(
    latest: TestSend | None,
    counts: Mapping[DeliveryStatus, int],
    print_: str,
    *,
    again: bool,
    when: str = "",
) -> TestDecision:
    """The rule (module docstring). `counts`: the log's rows of the latest test; `print_`: this
    render's fingerprint; `when`: the latest test's time as the editor reads it."""
    if latest is None:
        return TestDecision(True, 1, True, 0, print_, "first", "")
    at = f"the test at {when or latest.started_at}"
    total = sum(counts.values())
    unfinished = total == 0 or any(counts.get(s, 0) for s in UNFINISHED)
    changed = latest.fingerprint != print_ and bool(latest.fingerprint)
    nxt = latest.round + 1
    if again:
        return TestDecision(
            True, nxt, True, latest.round, print_, "again", f"--again: sending {at} again"
        )
    if changed:
        return TestDecision(
            True, nxt, True, latest.round, print_, "changed", f"changed since {at}: sending again"
        )
    if unfinished:
        return TestDecision(
            True,
            latest.round,
            False,
            latest.round,
            latest.fingerprint or print_,
            "resume",
            f"resuming {at} (test {latest.round})",
        )
    if not latest.fingerprint:
        # A log from before tests repeated: whether the message changed is not known.
        return TestDecision(
            True,
            nxt,
            True,
            latest.round,
            print_,
            "changed",
            f"{at} was sent before tests repeated: sending again",
        )
    sent = counts.get(S.SENT, 0)
    return TestDecision(
        False,
        latest.round,
        False,
        latest.round,
        print_,
        "unchanged",
        f"unchanged since {at} (test {latest.round}, {sent} of {total} sent): nothing sent;"
        " --again sends it again",
    )


def consider(
    database: Database | None,
    number: int,
    list_name: str,
    print_: str,
    *,
    again: bool,
    timezone: str = "",
) -> TestDecision:
    """`decide` on what the log holds now (read only; None, no log: the first test).
    `timezone`: [newsletter] timezone, in which the editor is told the latest test's time."""
    if database is None:
        return decide(None, {}, print_, again=again)
    latest = database.test_sends.latest(number, list_name)
    counts = database.deliveries.counts(number, list_name)
    when = local_time(timezone, latest.started_at) if latest is not None else ""
    return decide(latest, counts, print_, again=again, when=when)


def begin(decision: TestDecision, number: int, list_name: str, database: Database) -> None:
    """Make `decision` true as the run starts (under the send lock on SQLite): a new test is
    begun unless another run began it with the same message (then this run joins it); a test
    begun meanwhile for another message stops this run before anything is planned."""
    store = database.test_sends
    if decision.begin:
        begun = store.begin(
            number, list_name, decision.fingerprint, decision.reason, after=decision.after
        )
        if begun is not None:
            return
    latest = store.latest(number, list_name)
    if (
        latest is not None
        and latest.round == decision.round
        and (not latest.fingerprint or latest.fingerprint == decision.fingerprint)
    ):
        return
    raise DeliveryError(
        f"another test send of issue {number} to {list_name!r} began while this one started"
        + (f" (test {latest.round} at {latest.started_at})" if latest is not None else ""),
        hint="Re-run the same command: it resumes that test, or sends again if the issue changed.",
    )


def local_time(timezone: str, stamp: str) -> str:
    """An outbox time as the editor reads it: `10:42` today, else `2026-11-30 10:42`, in
    `timezone` ([newsletter] timezone; '': the machine's)."""
    try:
        moment = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    zone = zone_named(timezone)
    local = moment.astimezone(zone)
    today = date_of(dt.datetime.now(dt.UTC), zone)
    return local.strftime("%H:%M" if local.date() == today else "%Y-%m-%d %H:%M")
