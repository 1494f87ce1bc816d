"""Click reports made from fixed counts, for the tests of the report and its views."""

from __future__ import annotations

import datetime as dt

from newsletter.clicks.report import ClickReport, SendSummary, build_report
from newsletter.clicks.rules import Rule
from newsletter.clicks.tally import ClickCounts
from newsletter.config.settings import TrackingMode
from newsletter.content import Inline, Text
from newsletter.models import Issue
from newsletter.rendering.places import Part, Spot, outline

START = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)


def fixed_counts() -> ClickCounts:
    """Issue 14's first items: 1.2 has 3 readers (under 5); 2.1 has 2 machine requests and
    is its section's only line with any."""
    people = {Spot(Part.ITEM, 0, 0): 40, Spot(Part.ITEM, 0, 1): 3, Spot(Part.ITEM, 1, 0): 12}
    machines = {Spot(Part.ITEM, 0, 0): 100, Spot(Part.ITEM, 0, 1): 90, Spot(Part.ITEM, 1, 0): 2}
    return ClickCounts(
        people=people,
        machines=machines,
        section_people={0: 42, 1: 12},
        section_machines={0: 190, 1: 2},
        people_total=50,
        machines_total=230,
        rules={Rule.METHOD: 150, Rule.BURST: 42, Rule.CANARY: 38},
        requests=300,
    )


def fixed_delivery() -> SendSummary:
    """4,000 messages over four minutes, two of them quiet."""
    return SendSummary(
        sent=4_000,
        per_minute={START: 1_000, START + dt.timedelta(minutes=3, seconds=20): 3_000},
        bounced=40,
        complained=2,
        unsubscribed=9,
    )


def fixed_report(
    issue: Issue,
    *,
    mode: TrackingMode = TrackingMode.PER_READER,
    min_count: int = 5,
    delivery: SendSummary | None = None,
) -> ClickReport:
    return build_report(
        outline(issue),
        fixed_counts(),
        delivery or fixed_delivery(),
        list_name="main",
        mode=mode,
        min_count=min_count,
    )


def plain(text: str) -> Inline:
    """A title of one text span, as a code span or escaped Markdown would give it: no raw HTML
    to drop, so the markup reaches the report as letters."""
    return Inline(spans=(Text(text=text),))


def hostile(issue: Issue) -> Issue:
    """Issue 14 with titles that would be a formula, markup, and a terminal escape."""
    first = issue.sections[0]
    items = [
        first.items[0].model_copy(update={"title": plain('=HYPERLINK("https://evil.example")')}),
        first.items[1].model_copy(update={"title": plain("<script>alert(1)</script> & more")}),
        *first.items[2:],
    ]
    section = first.model_copy(update={"items": items})
    return issue.model_copy(update={"sections": [section, *issue.sections[1:]]})
