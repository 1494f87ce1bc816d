"""Verdicts in; the counts per report line, per section and for the issue out.

People are counted as readers where an event names its outbox row (`per-reader`: one reader
clicking an item three times is one), and as requests where it does not (`aggregate`: a
person's repeats within the window already collapsed by the rules). Machines are counted as
requests, every one. The canary is no report line: its requests count for the issue and for
their rule only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from newsletter.clicks.rules import LabelledEvent, Rule
from newsletter.rendering.places import Part, Place, Spot

_K = TypeVar("_K")


@dataclass(frozen=True)
class ClickCounts:
    people: Mapping[Spot, int]
    machines: Mapping[Spot, int]
    section_people: Mapping[int, int]  # a section's text and items together
    section_machines: Mapping[int, int]
    people_total: int
    machines_total: int
    rules: Mapping[Rule, int]  # requests per rule; `person` counts a person's repeats too
    requests: int


class _Who:
    """Distinct readers, plus requests that name none (each one its own)."""

    __slots__ = ("readers", "requests")

    def __init__(self) -> None:
        self.readers: set[int] = set()
        self.requests = 0

    def add(self, row: int | None) -> None:
        if row is None:
            self.requests += 1
        else:
            self.readers.add(row)

    def __len__(self) -> int:
        return len(self.readers) + self.requests


def tally(verdicts: Iterable[LabelledEvent]) -> ClickCounts:
    people: dict[Spot, _Who] = {}
    section_people: dict[int, _Who] = {}
    issue_people = _Who()
    machines: Counter[Spot] = Counter()
    section_machines: Counter[int] = Counter()
    rules: Counter[Rule] = Counter()
    requests = machines_total = 0
    where: dict[Place, tuple[Spot | None, int | None]] = {}  # an issue has a few hundred places
    for verdict in verdicts:
        requests += 1
        rules[verdict.rule] += 1
        place = verdict.event.place
        found = where.get(place)
        if found is None:
            found = where[place] = (place.spot, _section(place.spot))
        spot, section = found
        if not verdict.human:
            machines_total += 1
            if spot is not None:
                machines[spot] += 1
            if section is not None:
                section_machines[section] += 1
            continue
        if not verdict.counted or spot is None:
            continue
        row = verdict.event.row
        _who(people, spot).add(row)
        if section is not None:
            _who(section_people, section).add(row)
        issue_people.add(row)
    return ClickCounts(
        people={spot: len(who) for spot, who in people.items()},
        machines=dict(machines),
        section_people={section: len(who) for section, who in section_people.items()},
        section_machines=dict(section_machines),
        people_total=len(issue_people),
        machines_total=machines_total,
        rules=dict(rules),
        requests=requests,
    )


def _section(spot: Spot | None) -> int | None:
    if spot is None or spot.part in (Part.INTRO, Part.OUTRO):
        return None
    return spot.section


def _who(table: dict[_K, _Who], key: _K) -> _Who:
    who = table.get(key)
    if who is None:
        who = table[key] = _Who()
    return who
