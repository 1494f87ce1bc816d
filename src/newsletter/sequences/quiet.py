"""Quiet hours: a moment, [schedule] quiet_hours and [newsletter] timezone in; whether a step may
go now, and if not how long until it may, out (no welcome step at 3 a.m. newsletter time)."""

from __future__ import annotations

import datetime as dt

from newsletter.config.settings import Settings, quiet_span
from newsletter.schedule.when import zone_of

DAY = 24 * 60


def quiet_for(settings: Settings, moment: float) -> float:
    """Seconds from `moment` (Unix time) until the quiet hours end; 0.0 outside them."""
    span = quiet_span(settings.schedule.quiet_hours)
    if span is None:
        return 0.0
    start, end = span
    zone, _ = zone_of(settings.newsletter.timezone or None)
    local = dt.datetime.fromtimestamp(moment, zone)
    minute = local.hour * 60 + local.minute + local.second / 60 + local.microsecond / 60e6
    # Across midnight (22:00-07:00) when the end comes first in the day.
    inside = start <= minute < end if start <= end else minute >= start or minute < end
    if not inside:
        return 0.0
    return ((end - minute) % DAY) * 60.0
