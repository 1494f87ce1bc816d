"""People or machines: each scanner behaviour labelled by its rule, a person's clicks kept, the
rules tried in their order, and the window streamed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from newsletter.clicks.events import ClickEvent
from newsletter.clicks.rules import LabelledEvent, Rule, Windows, label
from newsletter.clicks.tally import tally
from newsletter.models import Issue
from newsletter.rendering.places import CANARY, Part, Place, Region, Spot, issue_links

T0 = 1_800_000_000.0
CHROME = "browser:chrome"
A = Place(Region.TITLE, 0, 0)
B = Place(Region.LINKS, 0, 3, 0)
C = Place(Region.LINKS, 1, 1, 0)


def event(
    at: float,
    place: Place,
    *,
    row: int | None = 1,
    method: str = "GET",
    agent: str = CHROME,
    ip: str = "198.51.100.0/24",
    since: float | None = 3600.0,
    prefetch: bool = False,
) -> ClickEvent:
    return ClickEvent(T0 + at, place, method, prefetch, agent, ip, since, row)


def rules(events: list[ClickEvent], windows: Windows | None = None) -> list[Rule]:
    return [verdict.rule for verdict in label(events, windows)]


def test_a_person_clicking_two_items_a_minute_apart() -> None:
    verdicts = list(label([event(0, A), event(60, C, since=3660.0)]))
    assert [v.rule for v in verdicts] == [Rule.PERSON, Rule.PERSON]
    assert all(v.human and v.counted for v in verdicts)


def test_a_head_sweep_is_machine() -> None:
    sweep = [event(n * 3, place, method="HEAD") for n, place in enumerate([A, B, C])]
    assert rules(sweep) == [Rule.METHOD] * 3


def test_a_prefetch_is_machine() -> None:
    assert rules([event(0, A, prefetch=True)]) == [Rule.PREFETCH]


def test_the_canary_and_the_requests_around_it() -> None:
    """The message's canary hit makes its requests within 10 s either side machine (spaced
    past the burst window), and leaves a later click alone."""
    found = rules([event(0, A), event(8, CANARY), event(14, B), event(40, C)])
    assert found == [Rule.NEAR_CANARY, Rule.CANARY, Rule.NEAR_CANARY, Rule.PERSON]


def test_a_gateway_fetching_every_link_within_a_second() -> None:
    links = [A, B, C, Place(Region.LINKS, 1, 2, 0), Place(Region.TEXT, 1, 2, 0)]
    sweep = [event(n * 0.2, place, since=300.0) for n, place in enumerate(links)]
    assert rules(sweep) == [Rule.BURST] * len(links)


def test_two_links_two_seconds_apart_are_a_burst_three_are_not() -> None:
    assert rules([event(0, A), event(2, B)]) == [Rule.BURST, Rule.BURST]
    assert rules([event(0, A), event(3, B)]) == [Rule.PERSON, Rule.PERSON]


def test_a_request_within_seconds_of_delivery() -> None:
    found = rules([event(0, A, since=3.0), event(100, B, since=-1.0), event(200, C, since=11.0)])
    assert found == [Rule.AT_DELIVERY, Rule.AT_DELIVERY, Rule.PERSON]


@pytest.mark.parametrize("agent", ["machine:python-requests", "machine:googlebot", ""])
def test_known_agents_and_no_agent(agent: str) -> None:
    assert rules([event(0, A, agent=agent)]) == [Rule.AGENT]


def test_the_first_rule_that_holds_names_the_machine() -> None:
    found = rules(
        [
            event(0, CANARY, method="HEAD", prefetch=True, agent="", since=0),
            event(100, CANARY, prefetch=True, agent="", since=0),
            event(200, CANARY, agent="", since=0),
            event(300, A, agent="", since=0),
        ]
    )
    assert found == [Rule.METHOD, Rule.PREFETCH, Rule.CANARY, Rule.AGENT]


def test_a_readers_repeats_are_counted_once() -> None:
    verdicts = list(label([event(0, A), event(5, A), event(7200, A), event(7300, A, row=2)]))
    assert [v.rule for v in verdicts] == [Rule.PERSON] * 4
    assert [v.counted for v in verdicts] == [True, False, False, True]


def test_aggregate_repeats_collapse_within_the_window_only() -> None:
    verdicts = list(label([event(0, A, row=None), event(30, A, row=None), event(200, A, row=None)]))
    assert [v.counted for v in verdicts] == [True, False, True]


def test_aggregate_messages_are_told_apart_by_address_and_agent() -> None:
    same = [event(0, A, row=None), event(0.5, B, row=None)]
    assert rules(same) == [Rule.BURST, Rule.BURST]
    apart = [event(0, A, row=None), event(0.5, B, row=None, ip="203.0.113.0/24")]
    assert rules(apart) == [Rule.PERSON, Rule.PERSON]
    other_agent = [event(0, A, row=None), event(0.5, B, row=None, agent="browser:firefox")]
    assert rules(other_agent) == [Rule.PERSON, Rule.PERSON]


def test_without_an_address_aggregate_events_have_no_message() -> None:
    found = list(label([event(0, A, row=None, ip=""), event(0.5, B, row=None, ip="")]))
    assert [v.rule for v in found] == [Rule.PERSON, Rule.PERSON]
    again = list(label([event(0, A, row=None, ip=""), event(1, A, row=None, ip="")]))
    assert [v.counted for v in again] == [True, True]


def test_a_flood_on_one_link_of_one_message_is_machine() -> None:
    flood = [event(n * 0.01, A) for n in range(200)]
    found = rules(flood)
    assert found[0] == Rule.PERSON  # the first request of a link is a click...
    assert found[64:] == [Rule.BURST] * 136  # ...but no person sends 64 within seconds


def test_windows_come_from_the_settings_and_zero_turns_a_rule_off() -> None:
    off = Windows(delivery=0.0, canary=0.0, burst=0.0)
    assert rules([event(0, A, since=3.0), event(0.5, B, since=3.5)], off) == [Rule.PERSON] * 2


@pytest.mark.slow
def test_verdicts_come_in_the_order_of_the_events_and_as_the_window_passes() -> None:
    consumed = 0

    def stream() -> Iterator[ClickEvent]:
        nonlocal consumed
        for n in range(100_000):
            consumed += 1
            yield event(n * 100.0, A if n % 2 else B, row=n)

    verdicts = label(stream())
    first = next(verdicts)
    assert first.event.row == 0
    assert consumed == 2  # labelled as soon as the next event is past its window
    rest = [v.event.row for v in verdicts]
    assert rest == list(range(1, 100_000))


def scripted_clicks(issue: Issue, *, per_reader: bool) -> list[ClickEvent]:
    """The Done-when scene: a person on two items a minute apart; a scanner's HEAD sweep; a
    canary hit with the fetches around it; a gateway fetching every link within a second."""
    links = [link.place for link in issue_links(issue)]
    person_a, person_b = Place(Region.TITLE, 0, 1), Place(Region.LINKS, 1, 2, 0)

    def at(when: float, place: Place, reader: int, **kw: object) -> ClickEvent:
        ip = f"192.0.{reader}.0/24"
        return event(when, place, row=reader if per_reader else None, ip=ip, **kw)  # type: ignore[arg-type]

    scene = [at(100, person_a, 1, since=4000.0), at(160, person_b, 1, since=4060.0)]
    scene += [at(5 + n * 0.5, p, 2, method="HEAD", since=5.0 + n) for n, p in enumerate(links)]
    scene += [at(50, links[3], 3, since=50.0), at(53, CANARY, 3, since=53.0)]
    scene += [at(56, links[7], 3, since=56.0)]
    scene += [at(30 + n * 0.02, p, 4, since=30.0) for n, p in enumerate(links)]
    return sorted(scene, key=lambda e: e.at)


@pytest.mark.parametrize("per_reader", [True, False], ids=["per-reader", "aggregate"])
def test_the_scripted_scene_counts_the_persons_two_items_only(
    issue: Issue, per_reader: bool
) -> None:
    scene = scripted_clicks(issue, per_reader=per_reader)
    verdicts: list[LabelledEvent] = list(label(scene))
    counts = tally(verdicts)
    assert counts.people == {Spot(Part.ITEM, 0, 1): 1, Spot(Part.ITEM, 1, 2): 1}
    assert counts.people_total == (1 if per_reader else 2)
    assert counts.machines_total == len(scene) - 2
    assert counts.rules[Rule.METHOD] == len(issue_links(issue))
    assert counts.rules[Rule.CANARY] == 1
    assert counts.rules[Rule.NEAR_CANARY] == 2
    assert counts.rules[Rule.BURST] == len(issue_links(issue))


def test_an_event_out_of_time_order_is_judged_against_the_window() -> None:
    # Two writers' clocks a moment apart: the later row carries the earlier time.
    assert rules([event(1.0, A), event(0.5, B)]) == [Rule.BURST, Rule.BURST]
    assert rules([event(5.0, CANARY), event(3.0, A)]) == [Rule.CANARY, Rule.NEAR_CANARY]
