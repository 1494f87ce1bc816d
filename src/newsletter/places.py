"""An issue's links and where each sits: Issue in; every link it holds, named by a Place, out.

A click token names a link by its place in the issue, never by its URL: the redirect answers
with the URL the issue has at that place, so no token can send a reader anywhere the issue does
not link (no open redirect), and the token stays short. The places are counted the same way
wherever they are used (the email's links, the redirect, the report), by this module.

A Place is (region, section, item, link):

* ``INTRO``, ``OUTRO``: the issue's text before the first section and after the last
  (section = item = 0).
* ``SECTION``: a section's own text, above its items (item = 0).
* ``TITLE``: an item's title (today the whole title links to the item's first link: link 0).
* ``TEXT``: an item's text (its summary; with richer content its paragraphs, lists and quotes,
  read in document order).
* ``LINKS``: the item's list of links, in order.
* ``CANARY``: the hidden link of every tracked message that no person sees or clicks.

``link`` is the n-th link of its region in document order, wherever in the region it stands (a
paragraph, a list entry, a quote): every link an issue can hold has exactly one place.
Section and item are 0-based indexes into the issue file, as `issue.sections[s].items[i]`.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import NamedTuple

from newsletter.markup import link_urls
from newsletter.models import Issue


class Region(IntEnum):
    """The part of an issue a link stands in; the number is what a click token carries."""

    INTRO = 0
    OUTRO = 1
    SECTION = 2
    TITLE = 3
    TEXT = 4
    LINKS = 5
    CANARY = 6


class Part(StrEnum):
    """What a line of the report stands for: a region's links summed to the thing a reader
    chose (an item, with its title, text and links together)."""

    INTRO = "intro"
    SECTION = "section"
    ITEM = "item"
    OUTRO = "outro"


class Spot(NamedTuple):
    """A report line: an item (section, item), a section's own text (section, 0), the intro
    or the outro (0, 0)."""

    part: Part
    section: int = 0
    item: int = 0


_PARTS = {
    Region.INTRO: Part.INTRO,
    Region.OUTRO: Part.OUTRO,
    Region.SECTION: Part.SECTION,
    Region.TITLE: Part.ITEM,
    Region.TEXT: Part.ITEM,
    Region.LINKS: Part.ITEM,
}


class Place(NamedTuple):
    """Where one link stands in an issue (see the module docstring)."""

    region: Region
    section: int = 0
    item: int = 0
    link: int = 0

    @property
    def spot(self) -> Spot | None:
        """The report line this link counts towards; None for the canary, which is no line."""
        part = _PARTS.get(self.region)
        if part is None:
            return None
        if part is Part.ITEM:
            return Spot(part, self.section, self.item)
        if part is Part.SECTION:
            return Spot(part, self.section)
        return Spot(part)


CANARY = Place(Region.CANARY)


class IssueLink(NamedTuple):
    place: Place
    url: str
    label: str  # what the reader sees: the item's title, the link's label, or its region


def issue_links(issue: Issue) -> list[IssueLink]:
    """Every link of the issue the email shows, in the order the email shows them (the
    canary is not among them: it is no link of the issue)."""
    found = [
        IssueLink(Place(Region.INTRO, link=n), url, "intro")
        for n, url in enumerate(link_urls(issue.intro))
    ]
    for s, section in enumerate(issue.sections):
        for i, item in enumerate(section.items):
            if item.url is not None:
                found.append(IssueLink(Place(Region.TITLE, s, i), item.url, item.title))
            for n, url in enumerate(link_urls(item.summary)):
                found.append(IssueLink(Place(Region.TEXT, s, i, n), url, item.title))
            for n, link in enumerate(item.links):
                found.append(IssueLink(Place(Region.LINKS, s, i, n), link.url, link.label))
    found += [
        IssueLink(Place(Region.OUTRO, link=n), url, "outro")
        for n, url in enumerate(link_urls(issue.outro))
    ]
    return found


def link_at(issue: Issue, place: Place) -> str | None:
    """The URL the issue has at `place`, or None (the canary, or a place the issue does not
    have: a token from before the file was edited)."""
    return next((link.url for link in issue_links(issue) if link.place == place), None)


class Outline(NamedTuple):
    """The issue's headings, for the report: each section's title and its items' titles, and
    the report lines that hold a link (a line without one is never shown)."""

    number: int
    title: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    linked: frozenset[Spot]


def outline(issue: Issue) -> Outline:
    return Outline(
        issue.number,
        issue.title,
        tuple(
            (section.title, tuple(item.title for item in section.items))
            for section in issue.sections
        ),
        frozenset(spot for link in issue_links(issue) if (spot := link.place.spot) is not None),
    )
