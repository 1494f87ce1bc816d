"""The issue's outline, its click counts and its delivery in; the report as a plain value out,
with every figure under `[privacy] min_count` hidden before any view sees it.

What is hidden (docs/guide/tracking.md): every count of what readers or their machines did
(people, machine requests, each rule's requests, bounces, complaints, unsubscribes) under
`min_count`, zero included, shows as "< 5". Then, since a sum and all but one of its parts give
away the last part, no sum (a section's total and its lines; the issue's total and its
sections, intro, outro and canary; the machine requests and each rule's) may pin a hidden
small figure to one value: while one does (one hidden figure alone; two whose sum shows they
are both 4; one beside a "hidden" one that the sum leaves at 0), the smallest figure still
shown is hidden with it. Such a figure is 5 or more, and is labelled so: "hidden", with a note
saying why, never "< 5" (a 134 shown as "< 5" misled the editor); the check above counts on
the reader knowing that. The counts of
messages sent are not about readers and are always shown. The views (clicks/tables.py,
clicks/page.py) get `Below` or `Withheld` in place of a hidden count, never the count.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import NamedTuple

from newsletter.clicks.rules import MACHINE_RULES, Rule
from newsletter.clicks.tally import ClickCounts
from newsletter.config.settings import TrackingMode
from newsletter.rendering.places import Outline, Part, Spot

MAX_BARS = 720  # of the delivery chart: a longer send is shown in buckets of several minutes


class Below(NamedTuple):
    """A count under the limit, shown as "< limit"."""

    limit: int

    def __str__(self) -> str:
        return f"< {self.limit}"


class Withheld(NamedTuple):
    """A figure of `limit` or more, hidden only so that a sum cannot give a small one away."""

    limit: int

    def __str__(self) -> str:
        return "hidden"


Count = int | Below | Withheld


def withheld_note(limit: int) -> str:
    """What a "hidden" figure is, for the views to print once under their figures."""
    return (
        f'"hidden": a figure of {limit} or more, hidden so that a total cannot give away'
        f" a figure under {limit}"
    )


def shown(count: Count) -> str:
    return f"{count:,}" if isinstance(count, int) else str(count)


@dataclass(frozen=True)
class Line:
    label: str  # its place in the issue: "1.2" (section 1, item 2), "1" (the section), "intro"
    title: str
    people: Count
    machines: Count


@dataclass(frozen=True)
class SectionLines:
    total: Line
    lines: tuple[Line, ...]


@dataclass(frozen=True)
class SendSummary:
    """What the outbox says of the issue's send to one list."""

    sent: int
    per_minute: Mapping[dt.datetime, int]  # the minute (UTC) -> messages sent in it
    bounced: int = 0
    complained: int = 0
    unsubscribed: int = 0


@dataclass(frozen=True)
class OutcomeRate:
    name: str
    count: Count
    rate: str  # of the messages sent: "0.12 %", "< 0.05 %", "n/a" when none (or too few) was sent


@dataclass(frozen=True)
class ClickReport:
    issue: int
    title: str
    list_name: str
    mode: TrackingMode
    min_count: int
    intro: Line | None
    sections: tuple[SectionLines, ...]
    outro: Line | None
    total: Line
    rules: tuple[tuple[Rule, Count], ...]  # machine requests per rule, in the rules' order
    sent: int
    bucket: int  # minutes per entry of `sent_over_time`
    sent_over_time: tuple[tuple[dt.datetime, int], ...]  # every bucket from first to last
    outcomes: tuple[OutcomeRate, ...]

    @property
    def withholds(self) -> bool:
        """Whether any figure is "hidden" (and so the views print `withheld_note`)."""
        figures = [f for line in lines(self) for f in (line.people, line.machines)]
        return any(isinstance(f, Withheld) for f in [*figures, *(c for _, c in self.rules)])

    @property
    def people_are(self) -> str:
        """What the people column counts."""
        return "readers" if self.mode == TrackingMode.PER_READER else "requests"


def lines(report: ClickReport) -> list[Line]:
    """The click table's lines in the order the issue has them, the total last."""
    found = [report.intro] if report.intro else []
    for section in report.sections:
        found += [section.total, *section.lines]
    if report.outro:
        found.append(report.outro)
    return [*found, report.total]


def hide_small(values: Sequence[int], groups: Sequence[Sequence[int]], limit: int) -> set[int]:
    """The indexes of `values` to hide: each under `limit`, then in every group (a sum first,
    then its parts, as indexes) the smallest shown one wherever the group pins a hidden one to
    one value, until none does. A limit of 1 hides nothing: a figure under it is 0, which "< 1"
    would tell anyway."""
    if limit <= 1:
        return set()
    hidden = {index for index, value in enumerate(values) if value < limit}
    changed = True
    while changed:
        changed = False
        for group in groups:
            if not _gives_away(values, group, hidden, limit):
                continue
            shown_ = [index for index in group if index not in hidden]
            if shown_:
                hidden.add(min(shown_, key=lambda index: (values[index], index)))
                changed = True
    return hidden


def _gives_away(values: Sequence[int], group: Sequence[int], hidden: set[int], limit: int) -> bool:
    """Whether someone who reads the group's shown figures, and knows each hidden one is under
    `limit` ("< 5") or at least `limit` ("hidden"), can tell a hidden one's value: the sum minus
    the parts is 0, so each hidden figure lies within the others' bounds. (A narrower range
    than "< 5" is allowed, as two small figures of a sum always give: that is not the value.)"""
    sign = {index: 1 if n == 0 else -1 for n, index in enumerate(group)}
    known = sum(sign[i] * values[i] for i in group if i not in hidden)

    def bounds(i: int) -> tuple[float, float]:
        return (0.0, limit - 1.0) if values[i] < limit else (float(limit), math.inf)

    for target in (i for i in group if i in hidden):
        low, high = float(known), float(known)  # the rest of the sum, as bounds
        for i in group:
            if i != target and i in hidden:
                lo, hi = bounds(i)
                low, high = (low + lo, high + hi) if sign[i] > 0 else (low - hi, high - lo)
        at_least, at_most = (-high, -low) if sign[target] > 0 else (low, high)
        # A "hidden" figure told here would give away the small one it hides in another sum.
        lo, hi = bounds(target)
        if max(at_least, lo) >= min(at_most, hi):
            return True
    return False


class _Column:
    """One column of figures and its sums, hidden as one."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.groups: list[list[int]] = []

    def add(self, value: int) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def counts(self, limit: int) -> list[Count]:
        hidden = hide_small(self.values, self.groups, limit)
        return [
            v if i not in hidden else Below(limit) if v < limit else Withheld(limit)
            for i, v in enumerate(self.values)
        ]


def build_report(
    outline: Outline,
    counts: ClickCounts,
    delivery: SendSummary,
    *,
    list_name: str,
    mode: TrackingMode,
    min_count: int,
) -> ClickReport:
    people, machines = _Column(), _Column()
    spots = _spots(outline)
    index: dict[object, tuple[int, int]] = {}

    def add(key: object, p: int, m: int) -> tuple[int, int]:
        index[key] = (people.add(p), machines.add(m))
        return index[key]

    total = add("issue", counts.people_total, counts.machines_total)
    canary = machines.add(counts.rules.get(Rule.CANARY, 0))
    top: list[tuple[int, int]] = []
    for spot in (Spot(Part.INTRO), Spot(Part.OUTRO)):
        if spot in outline.linked:
            top.append(add(spot, counts.people.get(spot, 0), counts.machines.get(spot, 0)))
    for s, lines in enumerate(spots):
        section = add(s, counts.section_people.get(s, 0), counts.section_machines.get(s, 0))
        top.append(section)
        parts = [
            add(spot, counts.people.get(spot, 0), counts.machines.get(spot, 0)) for spot in lines
        ]
        people.groups.append([section[0], *(p for p, _ in parts)])
        machines.groups.append([section[1], *(m for _, m in parts)])
    people.groups.append([total[0], *(p for p, _ in top)])
    machines.groups.append([total[1], canary, *(m for _, m in top)])
    rules = [
        machines.add(counts.rules.get(rule, 0)) for rule in MACHINE_RULES if rule != Rule.CANARY
    ]
    machines.groups.append([total[1], canary, *rules])
    shown_people, shown_machines = people.counts(min_count), machines.counts(min_count)

    def line(key: object, label: str, title: str) -> Line:
        p, m = index[key]
        return Line(label, title, shown_people[p], shown_machines[m])

    sections = []
    for s, lines in enumerate(spots):
        title, items = outline.sections[s]
        section_lines = []
        for spot in lines:
            if spot.part is Part.SECTION:
                section_lines.append(line(spot, f"{s + 1}.0", f"{title} (the section's text)"))
            else:
                section_lines.append(line(spot, f"{s + 1}.{spot.item + 1}", items[spot.item]))
        sections.append(SectionLines(line(s, f"{s + 1}", title), tuple(section_lines)))
    rule_counts = iter(rules)
    by_rule = tuple(
        (rule, shown_machines[canary if rule is Rule.CANARY else next(rule_counts)])
        for rule in MACHINE_RULES
    )
    bucket, over_time = _over_time(delivery.per_minute)
    return ClickReport(
        issue=outline.number,
        title=outline.title,
        list_name=list_name,
        mode=mode,
        min_count=min_count,
        intro=line(Spot(Part.INTRO), "intro", "Intro") if Spot(Part.INTRO) in index else None,
        sections=tuple(sections),
        outro=line(Spot(Part.OUTRO), "outro", "Outro") if Spot(Part.OUTRO) in index else None,
        total=line("issue", "all", "All links"),
        rules=by_rule,
        sent=delivery.sent,
        bucket=bucket,
        sent_over_time=over_time,
        outcomes=tuple(
            _outcome(name, count, delivery.sent, min_count)
            for name, count in (
                ("bounces", delivery.bounced),
                ("complaints", delivery.complained),
                ("unsubscribes", delivery.unsubscribed),
            )
        ),
    )


def _spots(outline: Outline) -> list[list[Spot]]:
    """Each section's report lines with a link: its own text first, then its items."""
    result = []
    for s, (_, items) in enumerate(outline.sections):
        candidates = [Spot(Part.SECTION, s), *(Spot(Part.ITEM, s, i) for i in range(len(items)))]
        result.append([spot for spot in candidates if spot in outline.linked])
    return result


def _outcome(name: str, count: int, sent: int, limit: int) -> OutcomeRate:
    hide = count < limit and limit > 1  # as hide_small: a limit of 1 hides nothing
    if sent <= 0:
        return OutcomeRate(name, Below(limit) if hide else count, "n/a")
    if hide and sent < limit:
        # "< 5" of 3 messages bounds the rate by nothing ("< 167 %" once): say why there is none.
        return OutcomeRate(name, Below(limit), f"n/a: fewer than {limit} sent")
    if hide:
        # An upper bound, so rounded up: "< 0.13 %" for 5 of 4,000 (0.125 %); at most 100 %.
        return OutcomeRate(name, Below(limit), f"< {_percent(limit, sent, ROUND_CEILING)}")
    return OutcomeRate(name, count, _percent(count, sent, ROUND_HALF_UP))


def _percent(count: int, sent: int, rounding: str) -> str:
    percent = Decimal(count) * 100 / Decimal(sent)
    places = Decimal("1") if percent >= 10 else Decimal("0.1") if percent >= 1 else Decimal("0.01")
    return f"{percent.quantize(places, rounding=rounding)} %"


def _over_time(
    per_minute: Mapping[dt.datetime, int],
) -> tuple[int, tuple[tuple[dt.datetime, int], ...]]:
    """Every minute from the first to the last (none left out for having sent nothing), in
    buckets of several minutes when there would be more than MAX_BARS."""
    floored: dict[dt.datetime, int] = {}
    for minute, sent in per_minute.items():
        key = minute.replace(second=0, microsecond=0)
        floored[key] = floored.get(key, 0) + sent
    if not floored:
        return 1, ()
    first, last = min(floored), max(floored)
    span = int((last - first).total_seconds() // 60) + 1
    bucket = max(1, math.ceil(span / MAX_BARS))
    sums = [0] * math.ceil(span / bucket)
    for minute, sent in floored.items():
        sums[int((minute - first).total_seconds() // 60) // bucket] += sent
    step = dt.timedelta(minutes=bucket)
    return bucket, tuple((first + n * step, sent) for n, sent in enumerate(sums))
