"""The moment a send is scheduled for: the editor's text and time zone in; one instant (UTC) and
how to show it back out, or an error that says what to write instead.

A wall-clock time names one instant only when its zone has exactly one offset for it. Twice a
year a zone with daylight saving has times that never happen (the clocks jump from 02:00 to
03:00: 02:30 does not exist) and times that happen twice (03:00 back to 02:00: 02:30 comes once
in summer time and once in winter time). Neither is guessed: a time that does not exist is an
error naming the jump, and a time that happens twice asks for the offset that picks one
(`2026-10-25 02:30 +02:00`). A time with an offset of its own is the instant the offset says.
`today 18:00` and `tomorrow 08:00` are days of the schedule's zone, whatever the machine's: the
same rules then apply to the date they name.
"""

from __future__ import annotations

import datetime as dt
import re
import time
import zoneinfo
from dataclasses import dataclass

from newsletter.days import date_of, machine_zone
from newsletter.errors import ScheduleError

UTC = dt.UTC
# How far ahead a send may be booked: a year covers any newsletter's calendar, and a moment
# past it is a typo (2062 for 2026) or a probe (9999-12-31, where the calendar itself ends).
HORIZON_DAYS = 366
FORMS = (
    '"2026-12-02 08:00", "2026-12-02 08:00:30", "2026-12-02T08:00", "today 18:00",'
    ' "tomorrow 08:00", or any of them with an offset ("2026-12-02 08:00 +08:00",'
    ' "2026-12-02 00:00 Z")'
)
_TIME = re.compile(
    r"(?:(?P<date>\d{4}-\d{2}-\d{2})[ T]|(?P<day>today|tomorrow)\s+)"
    r"(?P<clock>\d{1,2}:\d{2}(?::\d{2})?)"
    r"\s*(?P<offset>Z|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Moment:
    at: dt.datetime  # aware, UTC
    zone: str  # the IANA name it was given in ("" for the machine's unnamed zone)

    @property
    def timestamp(self) -> float:
        return self.at.timestamp()


def zone_of(name: str | None) -> tuple[dt.tzinfo, str]:
    """The zone called `name` and its name; None or "": the machine's zone."""
    if name:
        try:
            return zoneinfo.ZoneInfo(name), name
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(
                f"{name!r} is not a time zone",
                hint="Give an IANA name such as Asia/Shanghai, Europe/Berlin or UTC"
                " (`timedatectl list-timezones` lists them).",
            ) from None
    return machine_zone()


def parse_moment(text: str, zone_name: str | None, *, now: float | None = None) -> Moment:
    """`text` in `zone_name` (else the machine's zone) -> the one instant it names. `today`
    and `tomorrow` are the zone's, at `now` (default: the current time)."""
    zone, name = zone_of(zone_name)
    match = _TIME.fullmatch(text.strip())
    if match is None:
        raise ScheduleError(
            f"--at {text!r}: not a time this command reads",
            hint=f"Write the date and the time of day: {FORMS}.",
        )
    date = match["date"] or named_day(match["day"], zone, time.time() if now is None else now)
    hour, rest = match["clock"].split(":", 1)
    try:
        naive = dt.datetime.fromisoformat(f"{date}T{hour.zfill(2)}:{rest}")
    except ValueError as exc:
        raise ScheduleError(
            f"--at {text!r}: {exc}", hint=f"Give a date and time that exist: {FORMS}."
        ) from None
    offset = match["offset"]
    if offset:
        if offset.upper() == "Z":
            fixed = UTC
        else:
            sign = -1 if offset[0] == "-" else 1
            digits = offset[1:].replace(":", "")
            delta = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            if delta >= dt.timedelta(hours=24):
                raise ScheduleError(f"--at {text!r}: the offset {offset} is not one", hint=FORMS)
            fixed = dt.timezone(sign * delta)
    try:
        if offset:
            return Moment(naive.replace(tzinfo=fixed).astimezone(UTC), name)
        return Moment(_resolve(naive, zone, name, text), name)
    except OverflowError:  # in UTC it falls past 9999-12-31 or before year 1
        shown = naive.isoformat(" ", "minutes")  # strftime writes year 1 as "1"
        if naive.year == 1:
            raise ScheduleError(
                f"--at {text!r}: {shown} is long past",
                hint="Give a time in the future (to send now, leave out --at).",
            ) from None
        raise ScheduleError(
            f"--at {text!r}: {shown} is more than {HORIZON_DAYS} days ahead",
            hint=_HORIZON_HINT,
        ) from None


def named_day(word: str, zone: dt.tzinfo, now: float) -> str:
    """`today` or `tomorrow` in `zone` at `now`, as YYYY-MM-DD (the zone's calendar, not the
    machine's: 23:30 in Berlin is already tomorrow in Shanghai)."""
    today = date_of(dt.datetime.fromtimestamp(now, UTC), zone)
    day = today + dt.timedelta(days=1) if word.lower() == "tomorrow" else today
    return day.isoformat()


def _resolve(naive: dt.datetime, zone: dt.tzinfo, name: str, text: str) -> dt.datetime:
    """The one instant a wall-clock time names in `zone`; an error when it names none or two."""
    first, second = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first.astimezone(UTC)
    back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if back != naive:  # the clocks jumped over it
        raise ScheduleError(
            f"--at {text!r}: {naive:%Y-%m-%d %H:%M} does not happen in {name}: the clocks"
            f" jump from UTC{_offset(first)} to UTC{_offset(second)} that night",
            hint="Pick a time before or after the jump, or give the offset you mean"
            f' (--at "{naive:%Y-%m-%d %H:%M} {_offset(first)}").',
        )
    raise ScheduleError(
        f"--at {text!r}: {naive:%Y-%m-%d %H:%M} happens twice in {name} (the clocks go back"
        f" that night: once at UTC{_offset(first)}, then at UTC{_offset(second)})",
        hint=f'Say which with an offset: --at "{naive:%Y-%m-%d %H:%M} {_offset(first)}" or'
        f' --at "{naive:%Y-%m-%d %H:%M} {_offset(second)}".',
    )


def _offset(moment: dt.datetime) -> str:
    delta = moment.utcoffset() or dt.timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


_HORIZON_HINT = (
    f"Schedule a send at most {HORIZON_DAYS} days ahead (check the year), and book a later one"
    " nearer its time."
)


def check_future(moment: Moment, now: float) -> None:
    """A time already past is an error (a send meant for it would start at once, unasked), and
    so is one more than HORIZON_DAYS ahead."""
    if moment.timestamp - now > HORIZON_DAYS * 86_400:
        raise ScheduleError(
            f"--at: {moment.at:%Y-%m-%d %H:%M} UTC is more than {HORIZON_DAYS} days ahead",
            hint=_HORIZON_HINT,
        )
    if moment.timestamp <= now:
        ago = span(now - moment.timestamp)
        raise ScheduleError(
            f"--at: {describe_instant(moment.timestamp, moment.zone)} was {ago} ago",
            hint="Give a time in the future (to send now, leave out --at).",
        )


def describe_instant(timestamp: float, zone_name: str) -> str:
    """An instant in its zone and in UTC: `2026-12-02 08:00 CST (Asia/Shanghai), 00:00 UTC`."""
    try:
        zone, name = zone_of(zone_name or None)
    except ScheduleError:
        zone, name = UTC, zone_name
    moment = dt.datetime.fromtimestamp(round(timestamp), UTC)
    local = moment.astimezone(zone)
    clock = "%H:%M:%S" if moment.second else "%H:%M"
    if local.utcoffset() == dt.timedelta(0):
        named = "" if name in ("UTC", "Etc/UTC") else f" ({name})"
        return f"{moment:%Y-%m-%d} {moment.strftime(clock)} UTC{named}"
    day = "" if local.date() == moment.date() else f"{moment:%Y-%m-%d} "
    return (
        f"{local:%Y-%m-%d} {local.strftime(clock)} {_offset(local)} ({name}),"
        f" {day}{moment.strftime(clock)} UTC"
    )


def wall_clock(timestamp: float, zone_name: str) -> str:
    """An instant on its zone's clock, short: `2026-12-01 23:43 +08:00`."""
    try:
        zone, _ = zone_of(zone_name or None)
    except ScheduleError:
        zone = UTC
    local = dt.datetime.fromtimestamp(round(timestamp), zone)
    return f"{local:%Y-%m-%d %H:%M} {_offset(local)}"


def span(seconds: float) -> str:
    """A duration as a person reads it: 45 s, 20 min, 6.0 h, 3.5 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} days"
