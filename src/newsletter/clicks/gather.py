"""An open outbox, the settings, an issue and a list in; the click report of that send out.

The one pipeline every view of the report runs (`newsletter report`, the preview's Report tab):
the send's events read in time order from the outbox (streamed, never all held), labelled by
the rules, tallied per report line, and set beside what the delivery log says of the send;
then every small figure hidden (clicks/report.py). The report's lines are named from the issue
file as it is now; the mode is the one the send was made in (none recorded: not measured).
"""

from __future__ import annotations

import datetime as dt

from newsletter.clicks.events import ClickEvent
from newsletter.clicks.report import ClickReport, SendSummary, build_report
from newsletter.clicks.rules import Windows, label
from newsletter.clicks.tally import ClickCounts, tally
from newsletter.config.settings import Settings, TrackingMode
from newsletter.database import Database
from newsletter.models import Issue
from newsletter.rendering.places import outline


def gather_report(
    database: Database, settings: Settings, issue: Issue, list_name: str
) -> ClickReport:
    mode = database.sent_links.mode(issue.number, list_name)
    events = (ClickEvent(*record) for record in database.clicks.events(issue.number, list_name))
    counts = tally(label(events, Windows.from_settings(settings.tracking)))
    return build_report(
        outline(issue),
        counts,
        send_summary(database, issue.number, list_name),
        list_name=list_name,
        mode=TrackingMode.stored(mode),
        min_count=settings.privacy.min_count,
    )


def send_summary(database: Database, issue: int, list_name: str) -> SendSummary:
    figures = database.send_figures.of(issue, list_name)
    return SendSummary(
        sent=figures.sent,
        per_minute={
            dt.datetime.fromisoformat(minute).replace(tzinfo=dt.UTC): sent
            for minute, sent in figures.per_minute.items()
        },
        bounced=figures.bounced,
        complained=figures.complained,
        unsubscribed=figures.unsubscribed,
    )


def unsent_report(settings: Settings, issue: Issue, list_name: str) -> ClickReport:
    """The report of a send that has not happened (no delivery log yet): nothing measured."""
    counts = ClickCounts({}, {}, {}, {}, 0, 0, {}, 0)
    return build_report(
        outline(issue),
        counts,
        SendSummary(sent=0, per_minute={}),
        list_name=list_name,
        mode=TrackingMode.OFF,
        min_count=settings.privacy.min_count,
    )
