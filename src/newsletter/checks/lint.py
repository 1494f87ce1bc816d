"""Pre-send lint: an Issue, its RenderedEmail and a sample message's parts -> a list of Findings.

Errors block a send (`newsletter check` exits 1); warnings are printed and do not. Sizes are
measured on the message bytes as they will go on the wire, not on Python strings. A check says a
thing once: one finding per repeated URL, one for every empty section, naming each place; the
newsletter's own words are quoted in its language. `silence_findings` then sets apart the
warnings the issue file silenced (silence.py), so `check` can say what it did not show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import MIMEPart
from html.parser import HTMLParser
from typing import Literal
from urllib.parse import urlsplit

from newsletter.checks.orgdomain import organizational_domain
from newsletter.config.settings import Settings, TrackingMode
from newsletter.content import content_text
from newsletter.fields import PLACEHOLDER_PREFIX
from newsletter.i18n import quote
from newsletter.markup import Note
from newsletter.models import BIDI_CONTROLS, Issue, Placeholder, RenderedEmail, Section
from newsletter.rendering.clip import CUT_AT, GMAIL_CLIP, KB, kept_words
from newsletter.silence import Silence

HTML_WARN = 90 * KB
STYLE_LIMIT = 16 * KB  # Gmail drops <style> blocks past 16 KB
COSTLIEST = 3  # sections named when an issue nears the clip
NAMED = 5  # sections named of those that went online, or of the empty ones


@dataclass(frozen=True)
class Finding:
    level: Literal["error", "warning"]
    code: str
    message: str
    subject: str = ""  # the one URL the finding is about, for a silence that names URLs
    file: str | None = None  # the issue file's line it is at (the message starts `file:line: `)
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.level}: {self.message} [{self.code}]"


@dataclass(frozen=True)
class Silenced:
    """One entry of the issue file's `silence:` and the warnings it kept from being shown."""

    silence: Silence
    findings: tuple[Finding, ...]

    def __str__(self) -> str:
        count = len(self.findings)
        return f"{self.silence} ({count if count else 'nothing to silence'})"


def run_checks(
    issue: Issue,
    rendered: RenderedEmail,
    sample: tuple[str, str, int] | None,
    notes: list[Finding] | None = None,
    *,
    language: str,
) -> list[Finding]:
    """Every check, errors first; `sample` is one recipient's finished message as its decoded
    HTML part, text part and the HTML part's encoded size (None: a part is missing); `notes`
    are the issue file's own findings (note_findings); `language` the newsletter's."""
    findings: list[Finding] = list(notes or [])
    if sample is None:
        findings.append(Finding("error", "parts", "the message lacks its HTML or text part"))
    else:
        html_size = sample[2]
        # A cut email is near the clip by design: the clip finding says so instead.
        findings += check_size(html_size) if rendered.online_from is None else []
        findings += check_clip(issue, rendered, html_size)
    page = _Page()
    page.feed(rendered.html)
    findings += check_styles(page)
    findings += check_links(page, issue)
    findings += check_duplicate_urls(issue, language)
    findings += check_bidi(issue, language)
    findings += check_images(page)
    findings += check_empty_sections(issue, language)
    findings += check_unsubscribe(page, rendered)
    return sorted(findings, key=lambda f: f.level != "error")


def silence_findings(
    findings: list[Finding], silences: Iterable[Silence]
) -> tuple[list[Finding], list[Silenced]]:
    """The findings to show, and what each silence kept back. Only warnings are silenced: an
    error is what stops a send, and the issue file cannot name the checks that protect readers
    (silence.CHECKS)."""
    silences = list(silences)
    kept: list[Finding] = []
    held: dict[Silence, list[Finding]] = {s: [] for s in silences}
    for finding in findings:
        by = next(
            (
                s
                for s in silences
                if finding.level == "warning" and s.covers(finding.code, finding.subject)
            ),
            None,
        )
        if by is None:
            kept.append(finding)
        else:
            held[by].append(finding)
    return kept, [Silenced(s, tuple(held[s])) for s in silences]


def note_findings(notes: Iterable[Note], path: str) -> list[Finding]:
    """What the issue file's source says of itself (markup left out, images without a size)."""
    return [
        Finding(n.level, n.code, f"{path}:{n.line}: {n.message}", file=path, line=n.line)
        for n in notes
    ]


def encoded_size(part: MIMEPart) -> int:
    """Bytes the part's body takes on the wire (after its transfer encoding, CRLF line ends)."""
    payload = part.get_payload(decode=False)
    assert isinstance(payload, str)
    return len(payload.replace("\r\n", "\n").replace("\n", "\r\n").encode("ascii", "replace"))


def check_size(size: int) -> list[Finding]:
    shown = f"{size / KB:.1f} KB"
    if size > GMAIL_CLIP:
        return [
            Finding(
                "error",
                "size",
                f"the encoded HTML part is {shown}, over Gmail's ~102 KB clipping limit: "
                "Gmail would hide the rest, unsubscribe link included; shorten the issue",
            )
        ]
    if size > HTML_WARN:
        return [Finding("warning", "size", f"the encoded HTML part is {shown}, close to 102 KB")]
    return []


def check_clip(issue: Issue, rendered: RenderedEmail, size: int) -> list[Finding]:
    """Where the bytes go when an issue nears the clip, and which sections went online."""
    findings = []
    sizes = rendered.section_sizes
    if rendered.keeps_nothing:
        first = issue.sections[0]
        findings.append(
            Finding(
                "error",
                "clip",
                f"the section 1 {first.title} alone takes {sizes[0] / KB:.1f} KB, past Gmail's "
                "~102 KB clip, and not even its first block fits: the email would carry no "
                "section at all, only a link to the web version; shorten it, or split it",
            )
        )
    elif rendered.cut is not None:
        kept = rendered.cut[0]
        online = issue.sections[kept:]
        names = ", ".join(
            f"{n} {s.title}" for n, s in enumerate(online[:NAMED], start=kept + 1)
        ) + (f" and {len(online) - NAMED} more" if len(online) > NAMED else "")
        findings.append(
            Finding(
                "warning",
                "clip",
                f"the whole issue would be {rendered.whole_size / KB:.1f} KB, past Gmail's "
                f"~102 KB clip: the email keeps {kept_words(issue, rendered.cut)} and ends with a "
                f"link to the rest on the web version ({len(online)} section(s): {names}); the "
                "text part is whole",
            )
        )
    if sizes and (rendered.online_from is not None or size > HTML_WARN or size > CUT_AT):
        costly = sorted(range(len(sizes)), key=lambda i: -sizes[i])[:COSTLIEST]
        shown = ", ".join(
            f"{i + 1} {issue.sections[i].title} {sizes[i] / KB:.1f} KB" for i in costly
        )
        findings.append(
            Finding(
                "warning",
                "section-size",
                f"the sections that cost the most (of {rendered.whole_size / KB:.1f} KB): {shown}",
            )
        )
    return findings


def check_styles(page: _Page) -> list[Finding]:
    size = sum(len(s.encode()) for s in page.styles)
    if size <= STYLE_LIMIT:
        return []
    message = f"<style> blocks total {size / KB:.1f} KB; Gmail drops them past 16 KB"
    return [Finding("error", "style-size", message)]


def check_links(page: _Page, issue: Issue) -> list[Finding]:
    findings = []
    # The reader's own links and the tracked links' slots are words filled in per message;
    # the issue's links are checked as the issue has them.
    hrefs = [href for href, _ in page.links if not href.startswith(PLACEHOLDER_PREFIX)]
    hrefs += issue.links
    for href in sorted(set(hrefs)):
        parts = urlsplit(href)
        if parts.scheme == "mailto":
            continue
        if parts.scheme not in ("http", "https") or not parts.netloc:
            findings.append(Finding("error", "link", f"link {href!r} is not an absolute URL"))
        elif parts.scheme == "http":
            findings.append(Finding("warning", "http", f"link {href} is http, not https", href))
    return findings


def check_tracked_host(settings: Settings) -> list[Finding]:
    """With `[tracking] clicks` on, every link of the email names base_url's host: a host
    outside the sender's organizational domain is what filters look at (DMARC alignment), and
    what tracking services are known by."""
    if settings.tracking.clicks == TrackingMode.OFF:
        return []
    host = (urlsplit(settings.newsletter.base_url).hostname or "").lower().rstrip(".")
    sender = settings.newsletter.sender.rpartition("@")[2].strip(" >").lower().rstrip(".")
    if not host or not sender or organizational_domain(host) == organizational_domain(sender):
        return []
    return [
        Finding(
            "warning",
            "tracked-host",
            f"tracked links point at {host}, outside the sender's domain "
            f"{organizational_domain(sender)}: spam filters score links whose domain is not "
            f"the From domain's. Serve `newsletter serve` on a host under "
            f"{organizational_domain(sender)} and set [newsletter] base_url to it, or turn "
            '[tracking] clicks "off"',
        )
    ]


def finding_label(section: Section, index: int, language: str) -> str:
    """How findings name an item: `「title」 in 「section」` (the marks are the newsletter
    language's); an untitled item by its first words."""
    return f"{item_name(section, index, language)} in {quote(section.title.text, language)}"


def item_name(section: Section, index: int, language: str) -> str:
    item = section.items[index]
    if item.title is not None:
        name = item.title.text
    else:
        words = content_text(item.summary)
        name = words if len(words) <= 30 else f"{words[:29]}…"
    return quote(name, language)


def check_duplicate_urls(issue: Issue, language: str) -> list[Finding]:
    """The same URL under two different items is usually a copy-paste slip. One finding per
    URL, naming every item it is under once (by section), however many times it repeats."""
    places: dict[str, dict[str, dict[str, int]]] = {}  # url -> section -> item name -> times
    for section in issue.sections:
        where = quote(section.title.text, language)
        for index, item in enumerate(section.items):
            name = item_name(section, index, language)
            for url in item.own_links:
                names = places.setdefault(url, {}).setdefault(where, {})
                names[name] = names.get(name, 0) + 1
    findings = []
    for url, sections in places.items():
        count = sum(sum(names.values()) for names in sections.values())
        if count < 2:
            continue
        shown = "; ".join(
            f"{_listed([_times(n, k) for n, k in names.items()])} in {where}"
            for where, names in sections.items()
        )
        message = f"{url} is linked under {count} items: {shown}"
        findings.append(Finding("warning", "duplicate-url", message, url))
    return findings


def _times(name: str, count: int) -> str:
    return name if count == 1 else f"{name} ({count} times)"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_bidi(issue: Issue, language: str) -> list[Finding]:
    """Titles with bidi embeddings or overrides (the subject refuses them outright)."""
    titles = [section.title.text for section in issue.sections]
    titles += [
        item.title.text for section in issue.sections for item in section.items if item.title
    ]
    return [
        Finding(
            "warning",
            "bidi",
            f"the title {quote(BIDI_CONTROLS.sub(_code_point, title), language)} contains a "
            "bidirectional control, which shows the text in another order than it is written",
        )
        for title in titles
        if BIDI_CONTROLS.search(title)
    ]


def check_empty_sections(issue: Issue, language: str) -> list[Finding]:
    """One finding for every section with nothing in it: an issue just started by `newsletter
    new` has only its sections' titles, and says so in one line."""
    empty = [(n, s) for n, s in enumerate(issue.sections, start=1) if not s.intro and not s.items]
    if not empty:
        return []
    names = ", ".join(f"{n} {quote(s.title.text, language)}" for n, s in empty[:NAMED])
    names += f" and {len(empty) - NAMED} more" if len(empty) > NAMED else ""
    if len(empty) == 1:
        message = f"the section {names} has no text and no items"
    elif len(empty) == len(issue.sections) and not issue.intro:
        message = f"all {len(empty)} sections are still empty ({names}): the issue has no text yet"
    else:
        message = f"{len(empty)} sections have no text and no items: {names}"
    return [Finding("warning", "empty-section", message)]


def _code_point(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def check_images(page: _Page) -> list[Finding]:
    return [
        Finding("warning", "alt", f"image {src!r} has no alt text")
        for src, alt in page.images
        if alt is None
    ]


def check_unsubscribe(page: _Page, rendered: RenderedEmail) -> list[Finding]:
    url = Placeholder.UNSUBSCRIBE_URL.value
    visible = any(href == url and text.strip() for href, text in page.links)
    findings = []
    if not visible:
        findings.append(
            Finding(
                "error",
                "unsubscribe",
                "the HTML has no visible unsubscribe link; keep the one in the template's footer",
            )
        )
    if url not in rendered.text:
        findings.append(Finding("error", "unsubscribe", "the text part has no unsubscribe URL"))
    return findings


class _Page(HTMLParser):
    """Collects what the checks look at: links with their text, images, and <style> bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.images: list[tuple[str, str | None]] = []
        self.styles: list[str] = []
        self._href: str | None = None
        self._text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and values.get("href"):
            self._href, self._text = values["href"], []
        elif tag == "img":
            self.images.append((values.get("src") or "", values.get("alt")))
        elif tag == "style":
            self._in_style = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text)))
            self._href = None
        elif tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        elif self._href is not None:
            self._text.append(data)
