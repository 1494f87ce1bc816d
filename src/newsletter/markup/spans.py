"""Inline tokens in (a paragraph's, a title's); span data out: text, code, emphasis, links,
line breaks, and images (which the block reader turns into blocks of their own).

A line break inside a paragraph joins Chinese or Japanese to Chinese or Japanese without a
space, as it is written; a bare http(s) URL becomes a link; an image's size may follow it as
`{width=600 height=400}`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from newsletter.markup.tokens import Data

if TYPE_CHECKING:
    from markdown_it.token import Token

_LINK_SCHEMES = ("http", "https", "mailto")
_SIZE = re.compile(r"\{\s*((?:(?:width|height)=\d+\s*)+)\}")
_BARE_URL = re.compile(r"https?://[^\s<>\"'\u3000-\u303f\uff00-\uffef]+")
_BREAK_TAG = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)")
Level = Literal["error", "warning"]


def text_span(text: str) -> Data:
    return {"kind": "text", "text": text}


def _wide(char: str) -> bool:
    """Chinese and Japanese are written without spaces; Korean (Hangul) uses them."""
    if not char or "\uac00" <= char <= "\ud7af" or "\u1100" <= char <= "\u11ff":
        return False
    return unicodedata.east_asian_width(char) in ("W", "F")


class SpanReader:
    """Inline tokens -> span data; what cannot be shown is told to `note` (level, code, line,
    message)."""

    def __init__(self, note: Callable[[Level, str, int, str], None]) -> None:
        self.note = note

    def title(self, children: list[Token], line: int) -> list[Data]:
        """A title's spans: an image in it is shown as its alt text."""
        return trimmed(self.spans(children, line, allow_images=False))

    def spans(self, children: list[Token], line: int, *, allow_images: bool) -> list[Data]:
        """Inline tokens -> span data (images, if allowed, as image data in between)."""
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
                self._add_text(current, content, linkify=not self._in_link(stack))
                last = content[-1:] or last
            elif kind == "code_inline":
                current.append({"kind": "code", "text": token.content})
                last = token.content[-1:] or last
            elif kind == "softbreak":
                # A line break joins Chinese to Chinese without a space, anything else with one.
                after = _next_char(children, index + 1)
                if not (_wide(last) and _wide(after)):
                    self._add_text(current, " ", False)
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
                if allow_images:
                    current.append(image)
                else:
                    self.note(
                        "warning",
                        "markup",
                        line,
                        "an image cannot be shown in a title: its alt text is shown instead",
                    )
                    self._add_text(current, image["alt"], False)
            elif kind == "html_inline":
                self._html_inline(current, token.content, line)
            index += 1
        while stack:  # unclosed markup: markdown-it closes everything, but stay safe
            span, parent = stack.pop()
            for piece in self._closed(span):
                _append(parent, piece)
        if allow_images:
            return hoist_images(out)
        return out

    @staticmethod
    def _in_link(stack: list[tuple[Data, list[Data]]]) -> bool:
        return any(span["kind"] == "link" for span, _ in stack)

    def _opening(self, token: Token, line: int) -> Data:
        kind = {"strong_open": "strong", "em_open": "em", "s_open": "strike"}.get(token.type)
        if kind:
            return {"kind": kind, "spans": []}
        href = str(token.attrGet("href") or "")
        if urlsplit(href).scheme.lower() not in _LINK_SCHEMES or any(ord(c) < 32 for c in href):
            self.note(
                "error",
                "link",
                line,
                f"the link to {href!r} must be an absolute http://, https:// or mailto: address; "
                "its text is shown without the link",
            )
            return {"kind": "unlinked", "spans": []}
        return {"kind": "link", "url": href, "spans": []}

    @staticmethod
    def _closed(span: Data) -> list[Data]:
        """The span once closed: a link around a lone image is the image's link."""
        inner = trimmed(span["spans"]) if span["kind"] == "link" else span["spans"]
        if span["kind"] == "unlinked":
            return list(span["spans"])
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

    def _html_inline(self, current: list[Data], html: str, line: int) -> None:
        if _BREAK_TAG.fullmatch(html.strip()):
            current.append({"kind": "break"})
            return
        if html.startswith(("<!--", "</")):
            return  # a comment no reader sees anywhere; a closing tag, told with its opening
        name = _TAG_NAME.match(html)
        shown = f"<{name.group(1)}>" if name else html[:20]
        self.note(
            "warning",
            "markup",
            line,
            f"inline HTML {shown} is left out of the email (the text around it stays); "
            "write it in Markdown",
        )

    def _add_text(self, current: list[Data], text: str, linkify: bool) -> None:
        if not text:
            return
        pieces: list[Data] = []
        if linkify and "http" in text:
            position = 0
            for found in _BARE_URL.finditer(text):
                url = _trim_url(found.group())
                if found.start() > position:
                    pieces.append(text_span(text[position : found.start()]))
                pieces.append({"kind": "link", "url": url, "spans": [text_span(url)]})
                position = found.start() + len(url)
            if position < len(text):
                pieces.append(text_span(text[position:]))
        else:
            pieces = [text_span(text)]
        for piece in pieces:
            _append(current, piece)


def _append(spans: list[Data], piece: Data) -> None:
    """Add `piece`, joined to the text before it if both are text."""
    if piece.get("kind") == "text" and spans and spans[-1].get("kind") == "text":
        spans[-1] = text_span(spans[-1]["text"] + piece["text"])
    else:
        spans.append(piece)


def _trim_url(url: str) -> str:
    """A URL at the end of a sentence keeps its own closing parenthesis, not the sentence's."""
    while url and url[-1] in ".,:;!?'\")]}":
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url


def _next_char(children: list[Token], start: int) -> str:
    for token in children[start:]:
        if token.type in ("text", "code_inline") and token.content:
            return token.content[0]
        if token.type in ("softbreak", "hardbreak", "image"):
            return ""
    return ""


def trimmed(spans: list[Data]) -> list[Data]:
    """Without the spaces at either end (a title's, a link's)."""
    spans = [dict(s) for s in spans]
    if spans and spans[0].get("kind") == "text":
        spans[0]["text"] = spans[0]["text"].lstrip()
    if spans and spans[-1].get("kind") == "text":
        spans[-1]["text"] = spans[-1]["text"].rstrip()
    return [s for s in spans if not (s.get("kind") == "text" and not s["text"])]


def hoist_images(spans: list[Data]) -> list[Data]:
    """Images inside bold or italic text come out after it: an image is a block in an email."""
    out: list[Data] = []
    for span in spans:
        if span.get("kind") == "image":
            out.append(span)
            continue
        if "spans" in span:
            inner = hoist_images(span["spans"])
            images = [s for s in inner if s.get("kind") == "image"]
            rest = [s for s in inner if s.get("kind") != "image"]
            if rest:
                out.append({**span, "spans": rest})
            out.extend(images)
            continue
        out.append(span)
    return out
