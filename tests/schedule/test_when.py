"""The editor's time and zone -> one instant, against the real tz database: DST gaps and
repeats refused (never guessed), offsets honoured, bad forms and zones named."""

from __future__ import annotations

import datetime as dt

import pytest

from newsletter.config.settings import ScheduleSettings
from newsletter.errors import ScheduleError
from newsletter.schedule.when import check_future, describe_instant, parse_moment


def test_a_wall_clock_time_in_its_zone_is_one_instant() -> None:
    moment = parse_moment("2026-12-02 08:00", "Asia/Shanghai")
    assert moment.at == dt.datetime(2026, 12, 2, 0, 0, tzinfo=dt.UTC)
    assert describe_instant(moment.timestamp, moment.zone) == (
        "2026-12-02 08:00 +08:00 (Asia/Shanghai), 00:00 UTC"
    )
    assert parse_moment("2026-12-02T08:00:30", "UTC").at.second == 30
    assert describe_instant(
        parse_moment("2026-12-02 01:00", "Asia/Shanghai").timestamp, "Asia/Shanghai"
    )
    assert "2026-12-01 17:00 UTC" in describe_instant(
        parse_moment("2026-12-02 01:00", "Asia/Shanghai").timestamp, "Asia/Shanghai"
    )


def test_a_time_the_clocks_skip_is_refused() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_moment("2026-03-29 02:30", "Europe/Berlin")
    assert "does not happen in Europe/Berlin" in caught.value.message
    assert "UTC+01:00 to UTC+02:00" in caught.value.message
    assert caught.value.hint
    assert "offset" in caught.value.hint


def test_a_time_the_clocks_repeat_asks_for_an_offset() -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_moment("2026-10-25 02:30", "Europe/Berlin")
    assert "happens twice in Europe/Berlin" in caught.value.message
    assert caught.value.hint is not None
    assert '"2026-10-25 02:30 +02:00"' in caught.value.hint
    assert '"2026-10-25 02:30 +01:00"' in caught.value.hint
    summer = parse_moment("2026-10-25 02:30 +02:00", "Europe/Berlin")
    winter = parse_moment("2026-10-25 02:30+01:00", "Europe/Berlin")
    assert winter.timestamp - summer.timestamp == 3600
    assert parse_moment("2026-12-02 00:00 Z", "Asia/Shanghai").at.hour == 0


@pytest.mark.parametrize(
    "text", ["tomorrow 8am", "next week 08:00", "08:00", "2026-12-02", "02.12.2026 08:00"]
)
def test_an_unreadable_time_names_the_forms_it_takes(text: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_moment(text, "UTC")
    assert "not a time this command reads" in caught.value.message
    assert caught.value.hint
    assert '"2026-12-02 08:00"' in caught.value.hint


def _stamp(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def test_today_and_tomorrow_are_the_days_of_the_schedules_zone() -> None:
    # 23:30 in Berlin on 1 December is already 2 December in Shanghai.
    now = _stamp("2026-12-01 23:30+01:00")
    assert parse_moment("today 08:00", "Europe/Berlin", now=now).at == dt.datetime(
        2026, 12, 1, 7, 0, tzinfo=dt.UTC
    )
    assert parse_moment("Tomorrow 08:00", "Europe/Berlin", now=now).at == dt.datetime(
        2026, 12, 2, 7, 0, tzinfo=dt.UTC
    )
    assert parse_moment("today 08:00", "Asia/Shanghai", now=now).at == dt.datetime(
        2026, 12, 2, 0, 0, tzinfo=dt.UTC
    )
    assert parse_moment("tomorrow  9:05:30", "Asia/Shanghai", now=now).at == dt.datetime(
        2026, 12, 3, 1, 5, 30, tzinfo=dt.UTC
    )
    assert parse_moment("tomorrow 08:00 Z", "Asia/Shanghai", now=now).at.hour == 8


def test_today_or_tomorrow_on_a_daylight_saving_night_keeps_the_errors() -> None:
    eve_of_spring = _stamp("2026-03-28 12:00+01:00")
    with pytest.raises(ScheduleError) as caught:
        parse_moment("tomorrow 02:30", "Europe/Berlin", now=eve_of_spring)
    assert "2026-03-29 02:30 does not happen in Europe/Berlin" in caught.value.message
    eve_of_autumn = _stamp("2026-10-24 12:00+02:00")
    with pytest.raises(ScheduleError) as caught:
        parse_moment("tomorrow 02:30", "Europe/Berlin", now=eve_of_autumn)
    assert "2026-10-25 02:30 happens twice in Europe/Berlin" in caught.value.message
    autumn = parse_moment("tomorrow 02:30 +01:00", "Europe/Berlin", now=eve_of_autumn)
    assert autumn.at == dt.datetime(2026, 10, 25, 1, 30, tzinfo=dt.UTC)


def test_today_at_an_hour_gone_by_is_in_the_past() -> None:
    now = _stamp("2026-12-01 10:00+08:00")
    moment = parse_moment("today 09:00", "Asia/Shanghai", now=now)
    with pytest.raises(
        ScheduleError, match=r"2026-12-01 09:00 \+08:00 \(Asia/Shanghai\).* was 60 min ago"
    ):
        check_future(moment, now)


def test_a_date_that_does_not_exist_and_an_unknown_zone_are_errors() -> None:
    with pytest.raises(ScheduleError, match="day is out of range"):
        parse_moment("2026-02-30 08:00", "UTC")
    with pytest.raises(ScheduleError, match="'Mars/Olympus' is not a time zone"):
        parse_moment("2026-12-02 08:00", "Mars/Olympus")


def test_a_past_time_is_an_error() -> None:
    moment = parse_moment("2026-12-02 08:00", "Asia/Shanghai")
    check_future(moment, moment.timestamp - 1)
    with pytest.raises(ScheduleError, match=r"was 3\.0 h ago"):
        check_future(moment, moment.timestamp + 3 * 3600)


def test_the_machines_zone_keeps_its_daylight_saving_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    with pytest.raises(ScheduleError, match="happens twice in Europe/Berlin"):
        parse_moment("2026-10-25 02:30", None)
    monkeypatch.setenv("TZ", ":Asia/Shanghai")
    assert parse_moment("2026-12-02 08:00", "").zone == "Asia/Shanghai"


def test_grace_is_a_duration() -> None:
    assert ScheduleSettings().grace == 6 * 3600
    assert ScheduleSettings(grace="1h30m").grace == 5400  # type: ignore[arg-type]
    assert ScheduleSettings(grace=90).grace == 90
    with pytest.raises(ValueError, match="not a duration such as 6h"):
        ScheduleSettings(grace="six hours")  # type: ignore[arg-type]
