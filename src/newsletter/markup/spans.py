"""Inline tokens in (a paragraph's, a title's); span data out: text, code, emphasis, links,
line breaks, and images (which the block reader turns into blocks of their own). A line break
joins Chinese or Japanese to Chinese or Japanese without a space, as it is written; a bare
http(s) URL becomes a link; an image's size may follow it as `{width=600 height=400}`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from newsletter.markup.addresses import link_target, picture_source, player_page
from newsletter.markup.footnotes import Footnotes
from newsletter.markup.generators import tag_spans
from newsletter.markup.html import (
    BLOCKS,
    CODES,
    DROPPED,
    MEDIA,
    STYLES,
    TRANSPARENT,
    Tag,
    read_tag,
    size_of,
    without_dropped,
)
from newsletter.markup.tokens import Data, as_code, bare_links, hoist_images, text_span, trimmed

if TYPE_CHECKING:
    from markdown_it.token import Token

# What a file under issues/ may be (fields.py checks it again); anything else has no picture.
_PICTURES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_SIZE = re.compile(r"\{\s*((?:(?:width|height)=\d+\s*)+)\}")
Level = Literal["error", "warning"]
# Players that may name what they play in <source> tags inside them, not in their own `src`.
_PLAYERS = frozenset({"video", "audio"})


def wide(char: str) -> bool:
    """Chinese and Japanese are written without spaces; Korean (Hangul) uses them."""
    if not char or "\uac00" <= char <= "\ud7af" or "\u1100" <= char <= "\u11ff":
        return False
    return unicodedata.east_asian_width(char) in ("W", "F")


class SpanReader:
    """Inline tokens -> span data; what cannot be shown is told to `note` (level, code, line,
    message). `base` (the front matter's `base:`) is the address relative links and images
    resolve against, as on the weekly's own site."""

    def __init__(self, note: Callable[[Level, str, int, str], None], base: str = "") -> None:
        self.note = note
        self.base = base
        self.footnotes = Footnotes()
        self.at = 0  # the line of the paragraph being read, for a footnote's first reference

    def title(self, children: list[Token], line: int) -> list[Data]:
        """A title's spans: an image in it is shown as its alt text."""
        return trimmed(self.spans(children, line, allow_images=False))

    def spans(self, children: list[Token], line: int, *, allow_images: bool) -> list[Data]:
        """Inline tokens -> span data (images, if allowed, as image data in between)."""
        self.at = line
        children = without_dropped(children)
        out: list[Data] = []
        stack: list[tuple[Data, list[Data]]] = []
        current = out
        last = ""
        skip = 0  # characters of the next text token already read (an image's size)
        index = 0
        while index < len(children):
            token = children[index]
            kind = token.type
            if kind == "text":
                content = token.content[skip:]
                skip = 0
                self.add_text(current, content, linkify=not self._in_link(stack))
                last = content[-1:] or last
            elif kind == "code_inline":
                current.append({"kind": "code", "text": token.content})
                last = token.content[-1:] or last
            elif kind == "softbreak":
                # A line break joins Chinese to Chinese without a space, anything else with one.
                after = _next_char(children, index + 1)
                if not (wide(last) and wide(after)):
                    self.add_text(current, " ", False)
                    last = " "
            elif kind == "hardbreak":
                current.append({"kind": "break"})
            elif kind in ("strong_open", "em_open", "s_open", "link_open"):
                span = self._opening(token, line)
                stack.append((span, current))
                current = span["spans"]
            elif kind in ("strong_close", "em_close", "s_close", "link_close") and stack:
                span, parent = stack.pop()
                current = parent
                for piece in self._closed(span):
                    _append(current, piece)
            elif kind == "image":
                image = self._image(token, children, index, line)
                skip = image.pop("_skip", 0)
                src = self.picture(image["src"], "![…](…)", line)
                if src is not None:
                    self.place_image(current, {**image, "src": src}, line, allow_images)
            elif kind == "generator":  # a Hugo shortcode or a Liquid tag (generators.py)
                for piece in tag_spans(token.meta, self, line):
                    if piece["kind"] == "image":
                        self.place_image(current, piece, line, allow_images)
                    else:
                        current.append(piece)
            elif kind == "html_inline":
                tag = read_tag(token.content)
                if tag is not None:
                    current = self._html_tag(tag, stack, current, line, allow_images)
            index += 1
        while stack:  # unclosed markup: markdown-it closes everything, but stay safe
            span, parent = stack.pop()
            for piece in self._closed(span):
                _append(parent, piece)
        if allow_images:
            return hoist_images(out)
        return out

    def place_image(self, current: list[Data], image: Data, line: int, allow: bool) -> None:
        if allow:
            current.append(image)
            return
        self.note(
            "warning",
            "markup",
            line,
            "an image cannot be shown in a title: its alt text is shown instead",
        )
        self.add_text(current, image["alt"], False)

    @staticmethod
    def _in_link(stack: list[tuple[Data, list[Data]]]) -> bool:
        return any(span["kind"] == "link" for span, _ in stack)

    def _opening(self, token: Token, line: int) -> Data:
        kind = {"strong_open": "strong", "em_open": "em", "s_open": "strike"}.get(token.type)
        if kind:
            return {"kind": kind, "spans": []}
        return self.link_span(str(token.attrGet("href") or ""), line)

    def link_span(self, href: str, line: int) -> Data:
        """An opened link to `href`, or its text alone (with a Note) if it cannot be one."""
        target = self.link_target(href, line)
        if target is None:
            return {"kind": "unlinked", "spans": []}
        return {"kind": "link", "url": target, "spans": []}

    def link_target(self, href: str, line: int) -> str | None:
        """`href` as an absolute address (see addresses.py), or None and a Note."""
        return link_target(href, self.base, line, self.note)

    def picture(self, written: str, tag: str, line: int) -> str | None:
        """An image's address as `tag` wrote it, resolved; None, with an error naming the tag
        and the address, for one no email can show (see addresses.py)."""
        return picture_source(written, tag, self.base, line, self.note)

    def _closed(self, span: Data) -> list[Data]:
        """The span once closed: a link around a lone image is the image's link."""
        if span["kind"] == "_player":  # its fallback words ("cannot play this") give way
            return self._player_link(span["name"], span["attrs"], span["shown"], span["line"])
        inner = trimmed(span["spans"]) if span["kind"] == "link" else span["spans"]
        reference = self.footnotes.linked(span, self.at) if span["kind"] == "link" else None
        if reference is not None:
            return [text_span(reference)]
        if span["kind"] == "unlinked":
            return list(span["spans"])
        if span["kind"] == "_code":  # <kbd>, <code>: their words as code, their links links
            return as_code(span["spans"])
        if span["kind"] == "link" and len(inner) == 1 and inner[0].get("kind") == "image":
            return [{**inner[0], "href": span["url"]}]
        return [span] if span["spans"] else []

    def _image(self, token: Token, children: list[Token], index: int, line: int) -> Data:
        image: Data = {
            "kind": "image",
            "src": str(token.attrGet("src") or ""),
            "alt": token.content.strip(),
        }
        title = token.attrGet("title")
        if title:
            image["caption"] = str(title)
        following = children[index + 1] if index + 1 < len(children) else None
        if following is not None and following.type == "text":
            size = _SIZE.match(following.content)
            if size:
                for pair in size.group(1).split():
                    name, _, number = pair.partition("=")
                    image[name] = int(number)
                # Tokens are shared (parses are cached): the size is skipped, not cut off.
                image["_skip"] = size.end()
        return image

    def html_image(self, attrs: dict[str, str], line: int) -> Data | None:
        """An <img>'s image data: its source, alt, width and height. One with no picture to
        show (no source, a `data:` pixel, `src=x`) is left out with a Note."""
        src = self.picture(attrs.get("src", ""), "<img>", line)
        if src is None:
            return None
        scheme = urlsplit(src).scheme.lower()
        if scheme not in ("http", "https") and (scheme or not src.lower().endswith(_PICTURES)):
            self.left_out(f"<img src={src[:40]!r}>", "an image with no picture file", line)
            return None
        image: Data = {
            "kind": "image",
            "src": src,
            "alt": " ".join(attrs.get("alt", "").split()),
        }
        for name in ("width", "height"):
            size = size_of(attrs.get(name, ""))
            if size is not None:
                image[name] = size
        if attrs.get("title"):
            image["caption"] = attrs["title"]
        return image

    def media_link(self, tag_name: str, attrs: dict[str, str], line: int) -> Data | None:
        """A <video>, <audio> or <iframe> as a link to what it plays ("▶ its title"), or to its
        poster when it names no source at all."""
        src = attrs.get("src") or attrs.get("poster", "")
        if not src:
            return None
        target = self.link_target(src, line)
        if target is None:
            return None
        target = player_page(target)
        title = " ".join((attrs.get("title") or attrs.get("aria-label") or "").split())
        label = f"▶ {title}" if title else ("▶ audio" if tag_name == "audio" else "▶ video")
        return {"kind": "link", "url": target, "spans": [text_span(label)]}

    def _html_tag(
        self,
        tag: Tag,
        stack: list[tuple[Data, list[Data]]],
        current: list[Data],
        line: int,
        allow_images: bool,
    ) -> list[Data]:
        """One inline HTML tag read into the spans; the list new spans go into after it."""
        name = tag.name
        if tag.component:
            if not tag.closing:
                self.left_out(tag.shown, "an MDX component", line)
            return current
        if name in _PLAYERS or name == "source":
            after = self._player_tag(tag, stack, current, line)
            if after is not None:
                return after
        if name in STYLES or name in CODES or name == "a":
            if tag.closing:
                wanted = {"a": ("link", "unlinked")}.get(name, (STYLES.get(name, "_code"),))
                if stack and stack[-1][0]["kind"] in wanted:
                    span, parent = stack.pop()
                    for piece in self._closed(span):
                        _append(parent, piece)
                    return parent
                return current
            if tag.shown.endswith("/>"):
                return current
            if name == "a":
                span = self.link_span(tag.attrs.get("href", ""), line)
            else:
                span = {"kind": STYLES.get(name, "_code"), "spans": []}
            stack.append((span, current))
            inner: list[Data] = span["spans"]
            return inner
        if tag.closing or name in TRANSPARENT or (name in BLOCKS and name not in MEDIA):
            return current  # its words stay, in the paragraph they are in
        if name == "br":
            current.append({"kind": "break"})
        elif name == "img":
            image = self.html_image(tag.attrs, line)
            if image is not None:
                self.place_image(current, image, line, allow_images)
        elif name in MEDIA:
            current.extend(self._player_link(name, tag.attrs, tag.shown, line))
        else:
            self.left_out(tag.shown, "inline HTML" if name in DROPPED else "an unknown tag", line)
        return current

    def _player_tag(
        self, tag: Tag, stack: list[tuple[Data, list[Data]]], current: list[Data], line: int
    ) -> list[Data] | None:
        """A <video> or <audio> without a `src` waits for its <source> tags (each a token of
        its own in a paragraph) and becomes its link at </video>; None: an ordinary tag."""
        top = stack[-1][0] if stack else None
        waiting = top is not None and top["kind"] == "_player"
        if tag.name == "source":
            if waiting and top is not None and not top["attrs"].get("src"):
                top["attrs"]["src"] = tag.attrs.get("src", "")
            return current
        if tag.closing:
            if not (waiting and top is not None and top["name"] == tag.name):
                return current
            span, parent = stack.pop()
            for piece in self._closed(span):
                _append(parent, piece)
            return parent
        if tag.attrs.get("src") or tag.shown.endswith("/>"):
            return None
        player: Data = {"kind": "_player", "name": tag.name, "shown": tag.shown, "line": line}
        player |= {"attrs": dict(tag.attrs), "spans": []}
        stack.append((player, current))
        inner: list[Data] = player["spans"]
        return inner

    def _player_link(self, name: str, attrs: dict[str, str], shown: str, line: int) -> list[Data]:
        link = self.media_link(name, attrs, line)
        if link is None:
            self.left_out(shown, "a player without a source", line)
            return []
        return [link]

    def left_out(self, shown: str, what: str, line: int) -> None:
        fix = (
            "the site draws it, an email cannot: write what readers need of it in Markdown"
            if what == "an MDX component"
            else "write it in Markdown"
        )
        self.note(
            "warning",
            "markup",
            line,
            f"{what} {shown} is left out of the email (the text around it stays); {fix}",
        )

    def add_text(self, current: list[Data], text: str, linkify: bool) -> None:
        if not text:
            return
        if "[^" in text:  # footnote references, as their superscript numbers
            split = self.footnotes.split(text, self.at)
            if split != [text]:
                for words in split:
                    self.add_text(current, words, linkify)
                return
        pieces = bare_links(text) if linkify and "http" in text else [text_span(text)]
        for piece in pieces:
            _append(current, piece)


def _append(spans: list[Data], piece: Data) -> None:
    """Add `piece`, joined to the text before it if both are text."""
    if piece.get("kind") == "text" and spans and spans[-1].get("kind") == "text":
        spans[-1] = text_span(spans[-1]["text"] + piece["text"])
    else:
        spans.append(piece)


def _next_char(children: list[Token], start: int) -> str:
    for token in children[start:]:
        if token.type in ("text", "code_inline") and token.content:
            return token.content[0]
        if token.type in ("softbreak", "hardbreak", "image"):
            return ""
    return ""
