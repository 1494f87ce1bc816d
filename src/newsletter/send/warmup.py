"""Warm-up: [send] warmup, the newsletter's time zone and the delivery log in; how many messages
the sending domain may still send today, and when the next day begins, out.

Mailbox providers judge a new sending domain by its first weeks, so its daily volume ramps up.
"standard" is Ghost's published ramp (TryGhost/Ghost, ghost/core/core/server/services/
email-service/domain-warming-service.ts): round(200 x 1000^(day/41)) messages on day 0 to 41,
that is 200, 237, 280, 332 ... 650 on day 7, 2,116 on day 14, 6,880 on day 21, 22,377 on day
28, 72,779 on day 35, 200,000 on day 41, and no cap from day 42. An editor's own table
(`warmup = [500, 1000, 2000]`) caps day 0, 1, 2 ... and nothing past its end. Day 0 is the day
of the first message the log shows sent (any issue, any list: a project's log is its sending
domain's), or `warmup_start`; days begin at 00:00 in [newsletter] timezone.

What is counted is the log's `sent` rows of the day, read at the start of a run and again at
each renewal of its lease (so several workers share one cap, overshooting it at most by what
they send between two renewals), plus what this worker sent since.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from newsletter.config.settings import SendSettings
from newsletter.database import Database
from newsletter.days import date_of, day_of, zone_named

# The stop line's first words (words for the editor: the worker reads Pause.until instead).
WARMUP_STOP = "warm-up:"


@dataclass(frozen=True)
class Pause:
    """A send stopped by today's cap: its stop line, and when the next day begins (a Unix
    time, the one the line shows), which a scheduled send is postponed to."""

    line: str
    until: float


def daily_cap(plan: str | Sequence[int], day: int) -> int | None:
    """The cap of warm-up day `day` (0: the first); None: no cap. A day before day 0 (the clock
    set back behind the first sent row) is day 0, whichever ramp: the cap never lifts."""
    if plan == "off":
        return None
    day = max(day, 0)
    if isinstance(plan, str):
        if day > 41:
            return None
        cap: float = 200 * 1000.0 ** (day / 41)
        return round(cap)
    return plan[day] if day < len(plan) else None


class Warmup:
    """One run's view of today's cap. `clock` gives the moment (aware), for tests."""

    def __init__(
        self,
        database: Database,
        plan: str | Sequence[int],
        zone: str,
        *,
        start: dt.date | None = None,
        total: int = 0,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._database = database
        self._plan = plan
        self._zone = zone_named(zone)
        self._zone_name = zone or "local time"
        self._start = start
        self._clock = clock
        self.total = total  # the send's recipients, for the stop line
        self.cap: int | None = None
        self.sent = 0  # today's, by the log at the last refresh plus this worker's since
        self.refresh()

    def refresh(self) -> None:
        """Today's cap and what the log shows sent today."""
        today = day_of(self._clock(), self._zone)
        start = self._start or self._first_day() or today.date
        self.cap = daily_cap(self._plan, (today.date - start).days)
        if self.cap is None:
            return
        # From this midnight to the next: 23 or 25 hours when the clocks change.
        self.sent = self._database.deliveries.sent_between(_stamp(today.begin), _stamp(today.end))

    def left(self) -> int | None:
        """Messages that may still go out today; None: no cap."""
        return None if self.cap is None else max(self.cap - self.sent, 0)

    def resumes(self) -> dt.datetime:
        """The start of the next day, in the newsletter's zone."""
        return day_of(self._clock(), self._zone).end.astimezone(self._zone)

    def pause(self) -> Pause:
        """Today's cap is spent: the stop line (`warm-up: 400 of 12,000 today, resumes at 00:00
        Europe/Berlin`) and that next day's start, read from the clock once for both."""
        resumes = self.resumes()
        line = (
            f"{WARMUP_STOP} {self.cap or 0:,} of {self.total:,} today, resumes at"
            f" {resumes:%H:%M} {self._zone_name}"
        )
        return Pause(line, resumes.timestamp())

    def _first_day(self) -> dt.date | None:
        first = self._database.deliveries.first_sending()
        if first is None:
            return None
        return date_of(dt.datetime.fromisoformat(first), self._zone)


def _stamp(moment: dt.datetime) -> str:
    """As the log stamps sent_at (records.now): comparable as text."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000+00:00")


def warmup_for(database: Database, send: SendSettings, issue: int, list_name: str) -> Warmup | None:
    """The run's warm-up, or None when [send] warmup is off."""
    if send.warmup == "off":
        return None
    total = sum(database.deliveries.counts(issue, list_name).values())
    zone = getattr(send, "timezone", "")  # job.Options carries [newsletter] timezone
    return Warmup(database, send.warmup, zone, start=send.warmup_start, total=total)
