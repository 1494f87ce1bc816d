"""An Issue and its RenderedEmail in; the same email with each of the issue's links a slot word
(`__NL_LINK_3__`) in both parts, a hidden canary link added, and what each slot stands for, out.

The message factory fills every slot with the link's `BASE/r/TOKEN` (mail/message.py): once per
issue in `aggregate` mode, per reader in `per-reader` mode. Rewriting the rendered parts rather
than the templates keeps a project's own templates working: the HTML part's anchors are read in
document order and each is matched to the next of the issue's links (places.issue_links) whose
URL it has; the text part's links are found the same way (places.text_links), as the text
template writes them. The reader's own links (unsubscribe, web version, the rest of a clipped
issue) are placeholder words already and are never matched: they are never rewritten. Nor are
`mailto:` links, which no redirect can serve, nor anything the issue does not link (a
template's fixed link). A link the matching cannot find stays as it was, untracked.

The canary is an anchor with no content in a hidden block at the top of the HTML part (no
person sees or can tap it; a program that follows every link finds it). It points at the web
version: its click says nothing about an item.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser

from newsletter.models import PLACEHOLDER_PREFIX, Issue, RenderedEmail
from newsletter.rendering.places import CANARY, IssueLink, Place, issue_links, text_links

SLOT = PLACEHOLDER_PREFIX + "LINK_{n}__"
SLOT_WORD = re.compile(re.escape(PLACEHOLDER_PREFIX) + r"LINK_([0-9]{1,5})__")
# Hidden three ways (display, size, Outlook's mso-hide), out of the tab order and of what
# screen readers read.
CANARY_BLOCK = (
    '<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">'
    '<a href="{slot}" tabindex="-1"></a></div>'
)
_HREF = re.compile(r"""(\shref\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)""", re.IGNORECASE)
_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)
# What may end a URL the text part writes: a space, the end, a character no URL has, after
# the sentence's own punctuation if any.
_URL_END = re.compile(r"""[.,;:!?)\]'"]*(?:[\s\x00-\x1f]|[^\x00-\x7f]|$)""")
_URL_START = re.compile(r"[A-Za-z0-9/._~%+=&?#-]")


@dataclass(frozen=True)
class SlottedEmail:
    """The email with its links as slots; `links[n]` is what slot n stands for (the canary's
    URL is the web version's, `web_url`)."""

    rendered: RenderedEmail
    links: tuple[tuple[Place, str], ...]


def slot_word(n: int) -> str:
    return SLOT.format(n=n)


_SlotFor = Callable[[IssueLink], str]


def add_slots(rendered: RenderedEmail, issue: Issue, web_url: str) -> SlottedEmail:
    """`rendered` (of `issue`) with its links as slots and the canary, whose slot is the last,
    added; `web_url` is the issue's web version (where the canary leads)."""
    slots: dict[Place, int] = {}
    links: list[tuple[Place, str]] = []

    def slot(link: IssueLink) -> str:
        number = slots.get(link.place)
        if number is None:
            number = slots[link.place] = len(links)
            links.append((link.place, link.url))
        return slot_word(number)

    html_part = _slot_html(rendered.html, _trackable(issue_links(issue)), slot)
    text_part = _slot_text(rendered.text, _trackable(text_links(issue)), slot)
    canary = slot(IssueLink(CANARY, web_url, "canary"))
    html_part = _add_canary(html_part, canary)
    updated = rendered.model_copy(update={"html": html_part, "text": text_part})
    return SlottedEmail(updated, tuple(links))


def _trackable(links: list[IssueLink]) -> list[IssueLink]:
    return [link for link in links if link.url.startswith(("https://", "http://"))]


class _Anchors(HTMLParser):
    """Where each <a href> of an HTML document starts, with its raw tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[tuple[int, int], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and any(name == "href" for name, _ in attrs):
            self.found.append((self.getpos(), self.get_starttag_text() or ""))


def _slot_html(document: str, expected: list[IssueLink], slot: _SlotFor) -> str:
    parser = _Anchors()
    parser.feed(document)
    parser.close()
    # HTMLParser counts lines by "\n" alone (str.splitlines would count more breaks).
    starts = [0, *(m.end() for m in re.finditer("\n", document))]
    out: list[str] = []
    done = 0
    cursor = 0
    for (line, column), tag in parser.found:
        at = starts[line - 1] + column
        match = _HREF.search(tag)
        if match is None or document[at : at + len(tag)] != tag:
            continue
        raw = match.group(2)
        href = html.unescape(raw[1:-1] if raw[:1] in "\"'" else raw)
        found = _next(expected, cursor, href)
        if found is None:
            continue
        cursor = found + 1
        quote = raw[0] if raw[:1] in "\"'" else '"'
        value_at = at + match.start(2)
        out += [document[done:value_at], quote, slot(expected[found]), quote]
        done = value_at + len(raw)
    out.append(document[done:])
    return "".join(out)


def _slot_text(text: str, expected: list[IssueLink], slot: _SlotFor) -> str:
    out: list[str] = []
    done = 0
    for link in expected:
        at = _find_url(text, link.url, done)
        if at < 0:
            continue
        out += [text[done:at], slot(link)]
        done = at + len(link.url)
    out.append(text[done:])
    return "".join(out)


def _find_url(text: str, url: str, start: int) -> int:
    """Where `url` stands as a whole URL in `text` from `start` (not the start of a longer
    one, nor the end of one), or -1."""
    at = text.find(url, start)
    while at >= 0:
        before = text[at - 1] if at else " "
        if not _URL_START.fullmatch(before) and _URL_END.match(text, at + len(url)):
            return at
        at = text.find(url, at + 1)
    return -1


def _next(expected: list[IssueLink], start: int, url: str) -> int | None:
    for index in range(start, len(expected)):
        if expected[index].url == url:
            return index
    return None


def _add_canary(document: str, slot: str) -> str:
    block = CANARY_BLOCK.format(slot=slot)
    body = _BODY.search(document)
    if body is None:
        return block + document
    return document[: body.end()] + block + document[body.end() :]
