"""The newsletter's days: a moment and a zone in; its date, the day's first instant and the next
day's, out. THE notion of "today" (the warm-up's cap, a step dated today, `today 18:00`, a time
shown without its date).

A day runs from one local midnight to the next, whatever its length: 23 hours when the clocks go
forward, 25 when they go back (Europe/Berlin's 2026-03-29 and 2026-10-25). So its end is the
next date's midnight, never its midnight plus 24 hours: that would forget the last hour of a
25-hour day, and count the next day's first hour into a 23-hour one. A midnight the clocks
skip (a zone that springs forward at 00:00) is the instant they jump, and one they repeat is
the first of the two: the day begins at its earliest instant either way.
"""

from __future__ import annotations

import datetime as dt
import os
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

UTC = dt.UTC


@dataclass(frozen=True)
class Day:
    """One local day: its date, its first instant and the next day's (both aware, UTC)."""

    date: dt.date
    begin: dt.datetime
    end: dt.datetime


def machine_zone() -> tuple[dt.tzinfo, str]:
    """The machine's zone with its daylight-saving rules: TZ, else /etc/localtime's target."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        try:
            return zoneinfo.ZoneInfo(tz), tz
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    localtime = Path("/etc/localtime")
    try:
        target = str(localtime.resolve())
        if "zoneinfo/" in target:
            name = target.split("zoneinfo/", 1)[1]
            return zoneinfo.ZoneInfo(name), name
        with localtime.open("rb") as handle:
            return zoneinfo.ZoneInfo.from_file(handle), "localtime"
    except (OSError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return UTC, "UTC"


def zone_named(name: str) -> dt.tzinfo:
    """[newsletter] timezone's zone (checked when the settings load); "": the machine's."""
    return zoneinfo.ZoneInfo(name) if name else machine_zone()[0]


def date_of(moment: dt.datetime, zone: dt.tzinfo) -> dt.date:
    """The date in `zone` at `moment` (without a zone: UTC, as the outbox stores times)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(zone).date()


def midnight(date: dt.date, zone: dt.tzinfo) -> dt.datetime:
    """The first instant of `date` in `zone`, in UTC."""
    # fold=0: a skipped midnight takes the offset before the jump (the jump's instant), a
    # repeated one its first pass; either is the earliest instant of the date.
    return dt.datetime.combine(date, dt.time(), zone).astimezone(UTC)


def day_of(moment: dt.datetime, zone: dt.tzinfo) -> Day:
    """The local day `moment` falls in: from its midnight to the next date's."""
    date = date_of(moment, zone)
    return Day(date, midnight(date, zone), midnight(date + dt.timedelta(days=1), zone))
