"""Click events in, in time order; each labelled a person's or a machine's, with the rule, out.

The rules, in the order they are tried (the first that holds names the machine;
docs/guide/tracking.md says why each):

1. ``method``      not a GET (HEAD, OPTIONS, ...): a browser following a link sends GET.
2. ``prefetch``    the request says it is a prefetch or preview (Sec-Purpose, Purpose, X-Moz).
3. ``canary``      the hidden link no person sees.
4. ``agent``       no user agent, or one on crawlerdetect's list (crawlers, scanners, libraries).
5. ``at-delivery`` within `delivery` seconds of that recipient's delivery (or before it).
6. ``near-canary`` the same message's canary was requested within `canary` seconds.
7. ``burst``       the same message asked for another link within `burst` seconds (64 requests
                   of one message inside the window are a flood, all machine).
8. ``person``      none of the above.

"The same message" is the outbox row in `per-reader` mode, and in `aggregate` mode the kept
address and the agent class together; with `[privacy] ip = "none"` an aggregate event has no
message, so rules 6 and 7 and the collapsing of repeats cannot apply to it.

A person's repeat (the same message and link again: a double tap, a reload) is labelled a person
and not counted again: in `per-reader` mode ever, in `aggregate` mode within `repeat` seconds.
Rules 6 and 7 look both ways in time, so an event is labelled once `max(canary, burst)` seconds
of later events have been read: memory holds only the events of that window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from newsletter.clicks.events import MACHINE, ClickEvent
from newsletter.config.settings import TrackingSettings
from newsletter.rendering.places import Place, Region

_FLOOD = 64  # requests of one message within the window: no person
_PRUNE = 100_000  # aggregate repeats remembered before the stale ones are swept


class Rule(StrEnum):
    METHOD = "method"
    PREFETCH = "prefetch"
    CANARY = "canary"
    AGENT = "agent"
    AT_DELIVERY = "at-delivery"
    NEAR_CANARY = "near-canary"
    BURST = "burst"
    PERSON = "person"


MACHINE_RULES = tuple(rule for rule in Rule if rule is not Rule.PERSON)
ABOUT = {
    Rule.METHOD: "not a GET (HEAD, OPTIONS): a browser following a link sends GET",
    Rule.PREFETCH: "the request says it is a prefetch or a preview",
    Rule.CANARY: "the hidden link no person sees",
    Rule.AGENT: "no user agent, or a crawler, scanner or HTTP library's (crawlerdetect)",
    Rule.AT_DELIVERY: "within seconds of that recipient's delivery",
    Rule.NEAR_CANARY: "the same message's hidden link was requested within seconds",
    Rule.BURST: "the same message asked for another link within a second or two",
    Rule.PERSON: "none of the above",
}


@dataclass(frozen=True)
class Windows:
    """The seconds the rules measure with (`[tracking]`); `repeat` is aggregate mode's."""

    delivery: float = 10.0
    canary: float = 10.0
    burst: float = 2.0
    repeat: float = 60.0

    @classmethod
    def from_settings(cls, tracking: TrackingSettings) -> Windows:
        return cls(tracking.delivery_window, tracking.canary_window, tracking.burst_window)


class LabelledEvent(NamedTuple):
    event: ClickEvent
    rule: Rule
    counted: bool  # False for a person's repeat, and for every machine request

    @property
    def human(self) -> bool:
        return self.rule is Rule.PERSON


class _Pending:
    """An event waiting for the window after it to be read."""

    __slots__ = ("at", "burst", "canary", "event", "key", "near", "place", "rule")

    def __init__(self, event: ClickEvent, key: Hashable | None, rule: Rule | None) -> None:
        self.event = event
        self.at = event.at
        self.place = event.place
        self.canary = event.place.region is Region.CANARY
        self.key = key
        self.rule = rule
        self.burst = False
        self.near = False


class _Message(deque[_Pending]):
    """One message's events still in the window, oldest first, and its last canary request."""

    canary_at = -math.inf


def label(events: Iterable[ClickEvent], windows: Windows | None = None) -> Iterator[LabelledEvent]:
    """A LabelledEvent per event, in the order the events came. They should come in time order (the
    store's ORDER BY): a late one is judged against what is still in the window."""
    windows = windows or Windows()
    horizon = max(windows.burst, windows.canary)
    pending: deque[_Pending] = deque()
    recent: dict[Hashable, _Message] = {}
    repeats = _Repeats(windows.repeat)
    now = -math.inf
    for event in events:
        now = max(now, event.at)
        while pending and pending[0].event.at + horizon < now:
            yield _settle(pending.popleft(), recent, repeats)
        entry = _Pending(event, message_key(event), rule_at_once(event, windows))
        if entry.key is not None:
            group = recent.get(entry.key)
            if group is None:
                group = recent[entry.key] = _Message()
            if len(group) >= _FLOOD:
                entry.burst = True
            else:
                _compare(entry, group, windows)
                group.append(entry)
        pending.append(entry)
    while pending:
        yield _settle(pending.popleft(), recent, repeats)


def rule_at_once(event: ClickEvent, windows: Windows) -> Rule | None:
    """Rules 1-5: what the event alone shows."""
    if event.method != "GET":
        return Rule.METHOD
    if event.prefetch:
        return Rule.PREFETCH
    if event.place.region is Region.CANARY:
        return Rule.CANARY
    if not event.agent or event.agent.startswith(MACHINE):
        return Rule.AGENT
    if event.since_delivery is not None and event.since_delivery <= windows.delivery:
        return Rule.AT_DELIVERY
    return None


def message_key(event: ClickEvent) -> Hashable | None:
    """What tells one message's requests apart from another's (see the module docstring)."""
    if event.row is not None:
        return event.row
    if event.ip:
        return (event.ip, event.agent)
    return None


def _compare(entry: _Pending, group: _Message, windows: Windows) -> None:
    """Rules 6 and 7 between a new event and the same message's events still in the window,
    newest first: in time order, the scan stops at the first one out of reach."""
    at, place = entry.at, entry.place
    if entry.canary:
        for other in reversed(group):
            if at - other.at > windows.canary:
                break
            other.near = True
        group.canary_at = max(group.canary_at, at)
    elif abs(at - group.canary_at) <= windows.canary:
        entry.near = True
    burst = windows.burst
    for other in reversed(group):
        if at - other.at > burst:
            break
        if other.place != place:
            entry.burst = other.burst = True


def _settle(entry: _Pending, recent: dict[Hashable, _Message], repeats: _Repeats) -> LabelledEvent:
    if entry.key is not None:
        group = recent.get(entry.key)
        if group:
            if group[0] is entry:
                group.popleft()
            elif entry in group:  # events that came out of time order
                group.remove(entry)
            if not group:
                del recent[entry.key]
    rule = entry.rule
    if rule is None:
        rule = Rule.NEAR_CANARY if entry.near else Rule.BURST if entry.burst else Rule.PERSON
    counted = rule is Rule.PERSON and repeats.first(entry.event, entry.key)
    return LabelledEvent(entry.event, rule, counted)


class _Repeats:
    """The links each message's person was already counted for."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.readers: set[tuple[int, Place]] = set()
        self.visitors: dict[tuple[Hashable, Place], float] = {}
        self.limit = _PRUNE

    def first(self, event: ClickEvent, key: Hashable | None) -> bool:
        if event.row is not None:
            seen = (event.row, event.place)
            if seen in self.readers:
                return False
            self.readers.add(seen)
            return True
        if key is None:
            return True
        last = self.visitors.get((key, event.place))
        self.visitors[(key, event.place)] = event.at
        if len(self.visitors) > self.limit:
            self._prune(event.at)
        return last is None or event.at - last > self.window

    def _prune(self, now: float) -> None:
        self.visitors = {k: at for k, at in self.visitors.items() if now - at <= self.window}
        # Swept again only when it has doubled, so a busy window costs no sweep per event.
        self.limit = max(_PRUNE, 2 * len(self.visitors))
