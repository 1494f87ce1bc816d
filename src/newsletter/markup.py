"""A summary's small Markdown subset -> safe HTML and readable plain text.

Only **bold**, *italic*, `code` and [links](https://...) are understood; everything else, raw
HTML included, stays literal text and is escaped. The HTML is well-formed XML, as MJML requires.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from markupsafe import Markup

if TYPE_CHECKING:  # imported on first use: most issues never need the parser (see _MARKS)
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_SCHEMES = ("http", "https", "mailto")
# What can open markup in the subset (emphasis, code, links, escapes) or what markdown-it's
# input normalisation rewrites. Most summaries hold none of these: they render as themselves,
# escaped, without building a token stream (that halves the render of a typical issue).
_MARKS = re.compile(r"[*_`\[\]\\\r\0]")


def _safe_link(url: str) -> bool:
    return urlsplit(url.strip()).scheme.lower() in _SCHEMES and not any(ord(ch) < 32 for ch in url)


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False})
    # No `entity` rule: "&amp;" written by the editor stays those five characters.
    md.enable(["emphasis", "backticks", "link", "escape"])
    md.validateLink = _safe_link  # type: ignore[method-assign]
    return md


def to_html(text: str) -> Markup:
    """Inline HTML for `text`; safe to mark up because markdown-it escapes all raw text."""
    if not text:
        return Markup("")
    if not _MARKS.search(text):
        return Markup(_escape(text).strip())  # noqa: S704
    return _html_from_tokens(text)


def _html_from_tokens(text: str) -> Markup:
    return Markup(_parser().renderInline(text).strip())  # noqa: S704


def _escape(text: str) -> str:
    """What markdown-it's renderer does to a text token (its escapeHtml)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace('"', "&quot;")


def to_text(text: str) -> str:
    """The same summary as plain text: markers dropped, each link's URL written out after it."""
    if not text:
        return ""
    if not _MARKS.search(text):
        return text
    return _text_from_tokens(text)


def _text_from_tokens(text: str) -> str:
    out: list[str] = []
    hrefs: list[tuple[str, int]] = []
    for token in _inline_tokens(text):
        if token.type in ("text", "code_inline"):
            out.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif token.type == "link_open":
            hrefs.append((str(token.attrGet("href") or ""), len(out)))
        elif token.type == "link_close" and hrefs:
            href, start = hrefs.pop()
            label = "".join(out[start:])
            if href and href != label:
                out.append(f" ({href})")
    return "".join(out)


def link_urls(text: str) -> list[str]:
    """The targets of the links `to_html` makes of `text`, in order (the link check fetches
    them)."""
    tokens = _inline_tokens(text) if text else []
    return [str(t.attrGet("href")) for t in tokens if t.type == "link_open" and t.attrGet("href")]


def _inline_tokens(text: str) -> list[Token]:
    tokens = _parser().parseInline(text)
    return list(tokens[0].children or []) if tokens else []
