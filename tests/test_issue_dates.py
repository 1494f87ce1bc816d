"""The date readers see on an issue file without `date:` is the newsletter's, in its time zone:
today for a send about to start, else the day it first went out. 25 hours apart (Kiritimati,
UTC+14, and Pago Pago, UTC-11), the two zones are on different dates at every moment."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from pathlib import Path

import pytest

from newsletter.config.settings import Settings, load_settings
from newsletter.database import open_project_database
from newsletter.draft import dated_for_sending, sent_dates
from newsletter.issues import load_issue
from support.database import plan

ZONES = ("Pacific/Kiritimati", "Pacific/Pago_Pago")


def _settings(project: Path, zone: str) -> Settings:
    return load_settings(
        project / "newsletter.toml", environ={"NEWSLETTER_NEWSLETTER__TIMEZONE": zone}
    )


def test_a_send_about_to_start_is_dated_today_where_the_newsletter_is(project: Path) -> None:
    seen = []
    for zone in ZONES:
        settings = _settings(project, zone)
        issue = load_issue(settings.issues_dir, 14).model_copy(update={"date": None})
        day = dated_for_sending(settings, issue).date
        there = dt.datetime.now(zoneinfo.ZoneInfo(zone)).date()
        assert day in (there, there + dt.timedelta(days=1))  # a run across midnight holds
        seen.append(day)
    assert seen[0] != seen[1]


@pytest.mark.slow
def test_the_day_it_went_out_is_the_newsletters_day(project: Path) -> None:
    settings = _settings(project, "Asia/Shanghai")
    with open_project_database(settings) as database:
        plan(database, 14, "main", ["ann@example.org"])
        # Sent at 07:30 in Beijing: 23:30 the day before in UTC, as the log stores it.
        database.backend.run(
            "UPDATE deliveries SET state = 'sent', sent_at = '2026-12-01T23:30:00.000+00:00'"
        )
        assert sent_dates(settings, database=database) == {14: dt.date(2026, 12, 2)}
    assert sent_dates(_settings(project, "UTC")) == {14: dt.date(2026, 12, 1)}
