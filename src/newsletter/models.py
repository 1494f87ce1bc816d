"""The data every stage passes on: an Issue in; a RenderedEmail, Subscribers, delivery states out.

All models are frozen and forbid unknown fields, so a typo in an issue file is an error, not a
silently ignored key. The text inside an issue (titles, summaries, intros) is content.py's typed
blocks and spans.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from newsletter.config.settings import check_language
from newsletter.content import Block, Content, Image, Inline, Url, content_links, walk_blocks
from newsletter.fields import PLACEHOLDER_PREFIX as PLACEHOLDER_PREFIX
from newsletter.fields import check_text, check_url
from newsletter.silence import Silence, read_silence


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


# Python's header code breaks lines on all of these (str.splitlines), not only on CR and LF.
_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENCODED_WORD = re.compile(r"=\?.*\?=", re.DOTALL)


def header_problem(value: str) -> str | None:
    """Why `value` must not go into a mail header (line breaks, controls, `=?..?=`), or None."""
    bad = _HEADER_UNSAFE.search(value)
    if bad:
        code = f"U+{ord(bad.group()):04X}"
        return f"contains the control character {code}, which could inject a mail header"
    if _ENCODED_WORD.search(value):
        return "contains a raw `=?...?=` encoded word, which could inject a mail header"
    return None


# Bidirectional embeddings, overrides and isolates: in a subject they make an inbox show text
# in another order than it is written (the "Trojan Source" trick). Right-to-left text needs none.
BIDI_CONTROLS = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
MAX_SUBJECT_LENGTH = 200


def check_header_text(value: str) -> str:
    problem = header_problem(value)
    if problem is not None:
        raise ValueError(f"becomes the Subject header, and it {problem}")
    bidi = BIDI_CONTROLS.search(value)
    if bidi:
        raise ValueError(
            f"becomes the Subject header, and it contains the bidirectional control "
            f"U+{ord(bidi.group()):04X}, which makes an inbox show it in another order; remove it"
        )
    if len(value) > MAX_SUBJECT_LENGTH:
        raise ValueError(
            f"becomes the Subject header and is {len(value):,} characters long; "
            f"keep it under {MAX_SUBJECT_LENGTH} (inboxes show about 60)"
        )
    return value


Text = Annotated[str, StringConstraints(min_length=1), AfterValidator(check_text)]
# The issue's title becomes the Subject header: refused here, so the error names its line.
HeaderText = Annotated[Text, AfterValidator(check_header_text)]


class Link(Frozen):
    label: Text
    url: Url


class Item(Frozen):
    """One entry of a section: a title (a link, when `url` is set), text, and its links.

    Either may be missing: an untitled item is a quote or a note; a title-only item is one line
    of a compact list. In a YAML file the title links to the first of `links` unless `url` says
    otherwise.
    """

    title: Inline | None = None
    url: Url | None = None
    summary: Content = ()
    links: list[Link] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _title_links_to_the_first_link(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("url") is None and value.get("links"):
            first = value["links"][0]
            url = first.get("url") if isinstance(first, dict) else getattr(first, "url", None)
            try:
                return {**value, "url": check_url(url)} if isinstance(url, str) else value
            except ValueError:
                return value  # refused where it is written, in links
        return value

    @model_validator(mode="after")
    def _has_words(self) -> Item:
        if self.title is None and not self.summary:
            raise ValueError("has neither a title nor a summary: give it one")
        return self

    @property
    def shown_links(self) -> list[Link]:
        """The links row: none when it would only repeat the link the title is."""
        title_is_the_link = self.title is not None and not self.title.links
        if (
            title_is_the_link
            and not self.summary
            and len(self.links) == 1
            and self.links[0].url == self.url
        ):
            return []
        return self.links

    @property
    def url_apart(self) -> str | None:
        """The title's link where a part without links in text must write it on its own line
        (the text part): None when the links row or the title's own links already show it."""
        if self.url is None or self.title is None:
            return None
        shown = {link.url for link in self.links} | set(self.title.links)
        return None if self.url in shown else self.url

    @property
    def compact(self) -> bool:
        """A title and nothing more: one line of a compact list."""
        return self.title is not None and not self.summary and not self.shown_links

    @property
    def own_links(self) -> list[str]:
        """The item's links, each once: its title's, then its links row."""
        urls = ([self.url] if self.url else []) + (self.title.links if self.title else [])
        return list(dict.fromkeys(urls + [link.url for link in self.links]))


class Section(Frozen):
    title: Inline
    intro: Content = ()
    items: list[Item] = Field(default_factory=list)


def read_dead(value: Any) -> Any:
    """One entry of `dead:` as written, `- URL` or `- URL: REPLACEMENT`, -> DeadLink's fields."""
    if isinstance(value, str):
        return {"url": value}
    if isinstance(value, dict) and len(value) == 1 and "url" not in value:
        ((url, replacement),) = value.items()
        return {"url": url, "replacement": replacement}
    if isinstance(value, dict):
        return value
    raise ValueError("must be a URL, or `URL: its replacement` (a dead link and where it went)")


class DeadLink(Frozen):
    """A link of a sent issue that no longer answers, as the editor marks it: the archive page
    strikes it (with its replacement, if any); what was sent stays as it was."""

    url: Url
    replacement: Url | None = None


class Issue(Frozen):
    number: Annotated[int, Field(ge=1)]
    title: HeaderText
    date: dt.date | None = None
    preheader: Annotated[str, AfterValidator(check_text)] = ""
    cover: Image | None = None
    # This issue's numbering, over [render] numbering: "none" where its titles carry their own.
    numbering: Literal["chinese", "decimal", "none"] | None = None
    # This issue's greeting, over [newsletter] greeting: "auto", "" (none) or `Dear {name},`.
    greeting: Annotated[str, AfterValidator(check_text)] | None = None
    intro: Content = ()
    outro: Content = ()
    sections: list[Section] = Field(default_factory=list)
    # The issue's own language, when it is not the newsletter's: its fonts and `lang` follow.
    language: Annotated[str, AfterValidator(check_language)] | None = None
    # The checks whose warnings the editor has judged for this issue (see silence.py).
    silence: tuple[Annotated[Silence, BeforeValidator(read_silence)], ...] = ()
    # Links readers of the archive should know are gone (web/site/deadlinks.py); not the email's.
    dead: tuple[Annotated[DeadLink, BeforeValidator(read_dead)], ...] = ()

    @field_validator("silence")
    @classmethod
    def _each_check_once(cls, value: tuple[Silence, ...]) -> tuple[Silence, ...]:
        names = [s.check for s in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"names {', '.join(twice)} twice; keep one entry for each")
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Issue:
        if not self.sections and not self.intro:
            raise ValueError("has no sections and no intro: there is nothing to send")
        return self

    def blocks(self) -> list[Block]:
        """Every block of the issue's text in reading order, nested ones included."""
        blocks = [*self.intro]
        for section in self.sections:
            blocks += [*section.intro, *(b for item in section.items for b in item.summary)]
        return list(walk_blocks([*blocks, *self.outro]))

    @property
    def images(self) -> list[Image]:
        """Every image the issue shows: its cover, then those in its text."""
        found = [block for block in self.blocks() if isinstance(block, Image)]
        return ([self.cover] if self.cover else []) + found

    @property
    def links(self) -> list[str]:
        """Every link of the issue: items' titles and links, and those in all its text."""
        urls = [self.cover.href] if self.cover is not None and self.cover.href else []
        for section in self.sections:
            urls += section.title.links
            for item in section.items:
                urls += item.own_links
        return urls + content_links(self.blocks())

    def dead_links(self) -> dict[str, str | None]:
        """Each link marked dead -> its replacement (None: none given)."""
        return {dead.url: dead.replacement for dead in self.dead}

    def unheld_dead(self) -> list[int]:
        """The places in `dead` of the URLs this issue holds no link to (a typo, most likely)."""
        held = set(self.links)
        return [place for place, dead in enumerate(self.dead) if dead.url not in held]


class Placeholder(StrEnum):
    """Per-recipient values: plain ASCII words that survive MJML, both inliners and `href`."""

    NAME = "__NL_NAME__"
    UNSUBSCRIBE_URL = "__NL_UNSUBSCRIBE_URL__"
    WEB_URL = "__NL_WEB_URL__"

    @staticmethod
    def values(*, name: str, unsubscribe_url: str, web_url: str) -> dict[Placeholder, str]:
        """What each word becomes for one reader (a message) or for no one (the archive)."""
        return {
            Placeholder.NAME: name,
            Placeholder.UNSUBSCRIBE_URL: unsubscribe_url,
            Placeholder.WEB_URL: web_url,
        }


class RenderedEmail(Frozen):
    """One issue rendered once: HTML (CSS inlined) and text, with Placeholder words left to fill."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    issue_number: int
    subject: str
    html: str
    text: str
    # Gmail's clip (see clip.py): each section's encoded bytes in the whole issue's HTML (when
    # it is large enough for anyone to ask), that whole part's size, and the first section left
    # (wholly or in part) to the web version if the email was cut; `cut` is where: (section,
    # item, block), each from 0, the first piece left out (item -1: the section's intro;
    # (0, -1, 0): nothing of any section fits).
    section_sizes: tuple[int, ...] = ()
    whole_size: int = 0
    online_from: int | None = None
    cut: tuple[int, int, int] | None = None

    @property
    def keeps_nothing(self) -> bool:
        """Cut before the first piece of any section: the email is a link to the web version."""
        return self.cut == (0, -1, 0)


class Subscriber(Frozen):
    """A valid, normalised recipient.

    `envelope` is the address in ASCII form (punycode domain), used in RCPT TO and in the To
    header, which must be ASCII without SMTPUTF8; `line` is its row in the list, for messages.
    """

    envelope: str
    name: str = ""
    line: int | None = None


class DeliveryStatus(StrEnum):
    """The per-recipient states of the delivery log (docs/guide/sending.md, "Delivery states")."""

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    DEFERRED = "deferred"
    REJECTED = "rejected"
    FAILED = "failed"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


class OutgoingMessage(BaseModel):
    """One recipient's message as it goes on the wire: envelope plus the finished bytes.

    Built by message.py, carried by transport.py, recorded by outbox.py under `message_id`
    (stable across retries, so a resend can be de-duplicated by mailbox providers).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str
    sender: str
    recipient: str
    data: bytes
    # Set only by a builder that wrote every line itself (MessageFactory): each line ends in CRLF
    # and none starts with ".", so the transport sends the bytes after DATA as they are instead
    # of scanning the whole message to check line ends and dot-stuff.
    smtp_ready: bool = False
