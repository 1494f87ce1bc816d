"""The report value: counts per line, and every figure under min_count hidden so that no sum
gives it away."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from newsletter.clicks.events import ClickEvent
from newsletter.clicks.report import Below, ClickReport, SendSummary, build_report, hide_small
from newsletter.clicks.rules import LabelledEvent, Rule
from newsletter.clicks.tally import tally
from newsletter.models import Issue
from newsletter.rendering.places import CANARY, Part, Place, Region, Spot, outline
from support.clickreports import START, fixed_counts, fixed_report


def verdict(place: Place, rule: Rule, row: int | None, counted: bool = True) -> LabelledEvent:
    event = ClickEvent(0.0, place, "GET", False, "browser:chrome", "", None, row)
    return LabelledEvent(event, rule, counted and rule is Rule.PERSON)


def test_tally_counts_readers_once_per_line_and_section() -> None:
    title, link = Place(Region.TITLE, 0, 0), Place(Region.LINKS, 0, 0, 1)
    other = Place(Region.LINKS, 0, 1, 0)
    counts = tally(
        [
            verdict(title, Rule.PERSON, 1),
            verdict(link, Rule.PERSON, 1),  # the same reader, the same item: one
            verdict(other, Rule.PERSON, 1),
            verdict(other, Rule.PERSON, 2),
            verdict(other, Rule.PERSON, 2, counted=False),
            verdict(title, Rule.BURST, 3),
            verdict(CANARY, Rule.CANARY, 3),
        ]
    )
    assert counts.people == {Spot(Part.ITEM, 0, 0): 1, Spot(Part.ITEM, 0, 1): 2}
    assert counts.section_people == {0: 2}
    assert counts.people_total == 2
    assert counts.machines == {Spot(Part.ITEM, 0, 0): 1}
    assert counts.section_machines == {0: 1}
    assert counts.machines_total == 2
    assert counts.rules == {Rule.PERSON: 5, Rule.BURST: 1, Rule.CANARY: 1}
    assert counts.requests == 7


def test_tally_counts_requests_where_no_reader_is_named() -> None:
    place = Place(Region.TITLE, 0, 0)
    counts = tally([verdict(place, Rule.PERSON, None) for _ in range(3)])
    assert counts.people == {Spot(Part.ITEM, 0, 0): 3}
    assert counts.people_total == 3


def test_hide_small_hides_a_second_figure_of_a_sum() -> None:
    # total 20 = 12 + 6 + 2: the 2 alone hidden would be 20 - 12 - 6.
    assert hide_small([20, 12, 6, 2], [[0, 1, 2, 3]], 5) == {3, 2}
    # total 17 = 12 + 5 + 0: beside the 5, known to be 5 or more ("hidden"), the 0 would be
    # 17 - 12 - 5 or less: 0. The 12 goes too.
    assert hide_small([17, 12, 5, 0], [[0, 1, 2, 3]], 5) == {1, 2, 3}
    # Nothing under the limit: nothing hidden.
    assert hide_small([20, 12, 8], [[0, 1, 2]], 5) == set()
    # Two small ones hide each other, unless their sum gives both away: two figures under 5
    # that make 8 are 4 and 4.
    assert hide_small([20, 14, 3, 3], [[0, 1, 2, 3]], 5) == {2, 3}
    assert hide_small([20, 12, 4, 4], [[0, 1, 2, 3]], 5) == {1, 2, 3}


def test_hide_small_leaves_no_sum_with_one_hidden_figure() -> None:
    rng = random.Random(5)
    for _ in range(500):
        parts = [rng.choice([0, 1, 2, 3, 6, 9, 20, 50]) for _ in range(rng.randint(1, 6))]
        inner = [sum(parts[:2]), *parts[:2]]
        values = [sum(parts), *parts, *inner]
        groups = [list(range(len(parts) + 1)), [len(parts) + 1, 1, 2][: len(inner)]]
        hidden = hide_small(values, groups, 5)
        assert {i for i, v in enumerate(values) if v < 5} <= hidden
        for group in groups:
            assert sum(i in hidden for i in group) != 1


def report_for(issue: Issue, **kw: Any) -> ClickReport:
    return fixed_report(issue, **kw)


def test_the_report_holds_the_issues_lines_in_order(issue: Issue) -> None:
    report = report_for(issue)
    assert report.issue == 14
    assert report.people_are == "readers"
    assert [s.total.title for s in report.sections] == [str(s.title) for s in issue.sections]
    first = report.sections[0]
    assert [line.label for line in first.lines] == [
        f"1.{n + 1}" for n in range(len(issue.sections[0].items))
    ]
    assert first.lines[0].title == str(issue.sections[0].items[0].title)
    assert (first.lines[0].people, first.lines[0].machines) == (40, 100)
    assert report.intro is None
    assert report.outro is None
    assert report.total.people == 50


def test_every_figure_under_min_count_is_below_and_no_sum_gives_one_away(issue: Issue) -> None:
    report = report_for(issue)
    first, second = report.sections
    # 3 people on 1.2: hidden; so is the next smallest of section 1 (the zeros), never 40.
    assert first.lines[1].people == Below(5)
    assert first.lines[0].people == 40
    assert first.lines[2].people == Below(5)  # a zero, hidden too
    # 2 machine requests on 2.1, the section's only line: its total hides with it.
    assert second.lines[0].machines == Below(5)
    assert second.total.machines == Below(5)
    assert report.total.machines == 230
    assert dict(report.rules)[Rule.BURST] == 42
    assert dict(report.rules)[Rule.PREFETCH] == Below(5)
    assert str(Below(5)) == "< 5"


def test_outcomes_are_rates_of_the_messages_sent(issue: Issue) -> None:
    outcomes = {o.name: o for o in report_for(issue).outcomes}
    assert (outcomes["bounces"].count, outcomes["bounces"].rate) == (40, "1.0 %")
    assert (outcomes["unsubscribes"].count, outcomes["unsubscribes"].rate) == (9, "0.23 %")
    assert outcomes["complaints"].count == Below(5)
    assert outcomes["complaints"].rate == "< 0.13 %"


def test_min_count_is_the_settings(issue: Issue) -> None:
    report = report_for(issue, min_count=1)
    assert report.sections[0].lines[1].people == 3
    strict = report_for(issue, min_count=100)
    assert strict.total.people == Below(100)


def test_delivery_over_time_fills_the_quiet_minutes(issue: Issue) -> None:
    report = report_for(issue)
    assert report.bucket == 1
    assert [sent for _, sent in report.sent_over_time] == [1_000, 0, 0, 3_000]
    assert report.sent_over_time[3][0] == START + dt.timedelta(minutes=3)


def test_a_long_send_is_shown_in_buckets(issue: Issue) -> None:
    minutes = {START + dt.timedelta(minutes=n): 1 for n in range(0, 3 * 24 * 60, 7)}
    report = build_report(
        outline(issue),
        fixed_counts(),
        SendSummary(sent=len(minutes), per_minute=minutes),
        list_name="main",
        mode="aggregate",
        min_count=5,
    )
    assert report.bucket == 6
    assert len(report.sent_over_time) <= 720
    assert sum(sent for _, sent in report.sent_over_time) == len(minutes)
    assert report.people_are == "requests"


@pytest.mark.parametrize("sent", [0])
def test_nothing_sent_gives_no_rate(issue: Issue, sent: int) -> None:
    report = build_report(
        outline(issue),
        tally([]),
        SendSummary(sent=sent, per_minute={}),
        list_name="main",
        mode="off",
        min_count=5,
    )
    assert {o.rate for o in report.outcomes} == {"n/a"}
    assert report.sent_over_time == ()


def test_min_count_1_hides_nothing(issue: Issue) -> None:
    """Under 1 is 0: "< 1" would tell it anyway, and hiding it would hide a neighbour too."""
    report = report_for(issue, min_count=1)
    first = report.sections[0]
    assert first.lines[2].people == 0
    assert [line.people for line in first.lines[:3]] == [40, 3, 0]
    assert dict(report.rules)[Rule.PREFETCH] == 0
    zero = report_for(issue, min_count=1, delivery=SendSummary(sent=10, per_minute={}))
    assert {o.count for o in zero.outcomes} == {0}
