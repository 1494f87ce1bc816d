"""An issue's links and where each sits: Issue in; every link it holds, named by a Place, out.

A click token names a link by its place in the issue, never by its URL: the redirect answers
with the URL the issue has at that place, so no token can send a reader anywhere the issue does
not link (no open redirect), and the token stays short. The places are counted the same way
wherever they are used (the email's links, the redirect, the report), by this module.

A Place is (region, section, item, link):

* ``INTRO``, ``OUTRO``: the issue's text before the first section and after the last
  (section = item = 0); the cover image, when it links somewhere, is the intro's first link.
* ``SECTION``: a section's own links: those in its title, then those in its intro text
  (item = 0).
* ``TITLE``: an item's title: the item's URL when the title is plain text and links there as
  a whole, else the links inside the title (see `title_links`).
* ``TEXT``: an item's text (its summary: paragraphs, lists, quotes, linked images), read in
  document order.
* ``LINKS``: the item's links row as the email shows it (`Item.shown_links`: none when it would
  only repeat the title's link).
* ``CANARY``: the hidden link of every tracked message that no person sees or clicks.

``link`` is the n-th link of its region in document order, wherever in the region it stands (a
paragraph, a list entry, a quote, an image): every link the email can hold has exactly one
place, and the places come in the order the HTML part shows the links. The unsubscribe and
web-version links are the reader's own, not the issue's, and have none. The text part writes
an item's whole links row; a row the HTML leaves out is the title's one link, so its place is
the title's. Section and item are 0-based indexes into the issue file, as
`issue.sections[s].items[i]`.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import NamedTuple

from newsletter.content import Image, content_images, content_links, content_text
from newsletter.models import Issue, Item

# An untitled item's line in the report: the start of its text, this many characters at most.
_UNTITLED_LABEL = 60


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


def title_links(item: Item) -> list[str]:
    """The links an item's title holds, in the order the email shows them.

    A plain title is one link to the item's URL. A title with links of its own cannot also be
    one (an anchor holds no anchor), so the HTML shows those; the text part then writes the
    item's URL under the title when the links row does not already hold it, and it is the
    title's last link. An untitled item shows no title, so its URL is only its links row's."""
    if item.title is None:
        return []
    inner = item.title.links
    if item.url is None or item.url in inner:
        return inner
    if not inner:
        return [item.url]
    return inner if item.url in {link.url for link in item.links} else [*inner, item.url]


def _cover_links(cover: Image | None) -> list[str]:
    return [cover.href] if cover is not None and cover.href else []


def item_label(item: Item) -> str:
    """What a report calls an item: its title as text, or for an untitled item (a quote, a
    note) the start of its text, or its first image's alt text."""
    if item.title is not None:
        return str(item.title)
    words = " ".join(content_text(item.summary).split())
    if not words:
        images = content_images(item.summary)
        return images[0].alt if images else "(untitled)"
    if len(words) <= _UNTITLED_LABEL:
        return words
    cut = words[: _UNTITLED_LABEL - 1]
    # At a space when the text has them (not in Chinese): never half a word.
    head, space, _ = cut.rpartition(" ")
    return f"{head if space and head else cut}…"


def issue_links(issue: Issue) -> list[IssueLink]:
    """Every link of the issue the email shows, in the order the HTML part shows them (the
    canary is not among them: it is no link of the issue)."""
    found = [
        IssueLink(Place(Region.INTRO, link=n), url, "intro")
        for n, url in enumerate(_cover_links(issue.cover) + content_links(issue.intro))
    ]
    for s, section in enumerate(issue.sections):
        heading = str(section.title)
        own = section.title.links + content_links(section.intro)
        found += [
            IssueLink(Place(Region.SECTION, s, link=n), url, heading) for n, url in enumerate(own)
        ]
        for i, item in enumerate(section.items):
            label = item_label(item)
            for region, urls in (
                (Region.TITLE, title_links(item)),
                (Region.TEXT, content_links(item.summary)),
            ):
                found += [
                    IssueLink(Place(region, s, i, n), url, label) for n, url in enumerate(urls)
                ]
            found += [
                IssueLink(Place(Region.LINKS, s, i, n), link.url, link.label)
                for n, link in enumerate(item.shown_links)
            ]
    found += [
        IssueLink(Place(Region.OUTRO, link=n), url, "outro")
        for n, url in enumerate(content_links(issue.outro))
    ]
    return found


def text_links(issue: Issue) -> list[IssueLink]:
    """Every link the plain-text part writes, in its order, each named by the place it stands
    for: the HTML's, but that the text part writes an item's URL under its title only when the
    links row does not hold it. It writes the links row whole, also the one the HTML leaves out
    (it would only repeat the title's one link): that line is the title's place."""
    found = []
    for link in issue_links(issue):
        place = link.place
        if place.region is Region.TITLE:
            item = issue.sections[place.section].items[place.item]
            inner = item.title.links if item.title is not None else []
            in_row = item.url in {row.url for row in item.links}
            if place.link >= len(inner) and in_row and item.shown_links:
                continue  # the row's own line (a LINKS place) writes it
        found.append(link)
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
            (str(section.title), tuple(item_label(item) for item in section.items))
            for section in issue.sections
        ),
        frozenset(spot for link in issue_links(issue) if (spot := link.place.spot) is not None),
    )
