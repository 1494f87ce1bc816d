"""The archive's Atom feed (RFC 4287): the published issues, newest first, in; feed.xml out (for
`serve` at /feed.xml and `build --site`), and the <link rel="alternate"> every page carries.

Each entry is one issue: its public page as id and link, its date (the file's `date:`, else the
day it first went to subscribers; midnight UTC) as published and updated, its preheader as the
summary, and as content a plain HTML reading of the issue (sections, item titles linking to
their first link, summaries through the same Markdown subset as the email), which feed readers
show as they like, rather than the email's table layout. At most FEED_ENTRIES issues: a feed is
polled again and again, and the archive keeps the rest. Every link is absolute (base_url), as
a feed is read away from the site. Written with the standard library's ElementTree, which
escapes every text and attribute; characters XML 1.0 forbids are dropped from the text.
"""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from newsletter.config.settings import Settings
from newsletter.content import inline_html
from newsletter.i18n import PAGES, strings_for
from newsletter.links import feed_url, issue_url
from newsletter.models import Issue
from newsletter.rendering.labels import item_number, numbering_style, section_number
from newsletter.rendering.render import image_url, preheader_for
from newsletter.web.site.deadlinks import mark_dead_links
from newsletter.web.site.pages import render_page

ATOM = "http://www.w3.org/2005/Atom"
FEED_ENTRIES = 20
MEDIA_TYPE = "application/atom+xml"
_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class FeedEntry:
    """One issue as the feed shows it: `day` is the date readers see (None: never dated, then
    `fallback`, the file's modification time, stands in)."""

    issue: Issue
    day: dt.date | None
    fallback: dt.datetime


def link_tag(settings: Settings) -> str:
    """The <link> that lets browsers and feed readers find the feed from any page."""
    return (
        f'<link rel="alternate" type="{MEDIA_TYPE}" '
        f'title="{escape(settings.newsletter.name)}" '
        f'href="{escape(feed_url(settings.newsletter.base_url))}">'
    )


def add_link_tag(page: str, settings: Settings) -> str:
    """`page` (a full HTML document, such as an issue's email) with link_tag in its head."""
    head = page.find("</head>")
    if head < 0:
        return page
    return page[:head] + link_tag(settings) + page[head:]


def atom_feed(settings: Settings, entries: Sequence[FeedEntry]) -> str:
    """The feed document (UTF-8 text with its XML declaration) for `entries`, newest first."""
    base_url = settings.newsletter.base_url.rstrip("/")
    language = settings.newsletter.language
    name = settings.newsletter.name
    text = strings_for(PAGES, language)
    shown = list(entries[:FEED_ENTRIES])
    stamps = [_instant(e) for e in shown]

    feed = ET.Element(f"{{{ATOM}}}feed", {"xml:lang": language})
    _text(feed, "id", f"{base_url}/")
    _text(feed, "title", name)
    _text(feed, "subtitle", text["archive_lead"].format(name=name))
    _text(feed, "updated", _rfc3339(max(stamps, default=_EPOCH)))
    _link(feed, "self", MEDIA_TYPE, feed_url(base_url))
    _link(feed, "alternate", "text/html", f"{base_url}/")
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    _text(author, "name", name)
    for entry, stamp in zip(shown, stamps, strict=True):
        issue = entry.issue
        url = issue_url(base_url, issue.number)
        item = ET.SubElement(feed, f"{{{ATOM}}}entry")
        _text(item, "id", url)
        _text(item, "title", issue.title)
        _link(item, "alternate", "text/html", url)
        _text(item, "published", _rfc3339(stamp))
        _text(item, "updated", _rfc3339(stamp))
        _text(item, "summary", preheader_for(issue), type="text")
        _text(item, "content", entry_html(issue, settings), type="html")
    ET.register_namespace("", ATOM)
    body = ET.tostring(feed, encoding="unicode", short_empty_elements=True)
    return f'<?xml version="1.0" encoding="utf-8"?>\n{body}\n'


def entry_html(issue: Issue, settings: Settings) -> str:
    """The issue as plain HTML for a feed reader (templates/feed_entry.html)."""
    language, style = settings.newsletter.language, numbering_style(settings, issue)
    base_url = settings.newsletter.base_url
    page = render_page(
        "feed_entry.html",
        settings,
        issue=issue,
        inline=inline_html,
        image_url=lambda image: image_url(image, base_url),
        section_number=lambda n: section_number(n, language, style),
        item_number=lambda n: item_number(n, language, style),
    )
    # The links the editor marked dead are noted as on the issue's page (no style: a feed
    # reader drops it, the note stays).
    words = strings_for(PAGES, issue.language or language)
    return mark_dead_links(page, issue.dead_links(), words)


def _instant(entry: FeedEntry) -> dt.datetime:
    if entry.day is None:
        return entry.fallback.astimezone(dt.UTC).replace(microsecond=0)
    return dt.datetime.combine(entry.day, dt.time(), tzinfo=dt.UTC)


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(parent: ET.Element, tag: str, value: str, **attributes: str) -> None:
    child = ET.SubElement(parent, f"{{{ATOM}}}{tag}", attributes)
    child.text = _XML_FORBIDDEN.sub("", value)


def _link(parent: ET.Element, rel: str, media_type: str, href: str) -> None:
    ET.SubElement(parent, f"{{{ATOM}}}link", {"rel": rel, "type": media_type, "href": href})
