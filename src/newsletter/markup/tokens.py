"""markdown-it configured for issue text; the Note type, and the token and span helpers the
readers share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported on first use: most YAML summaries never need the parser
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

Data = dict[str, Any]
# A bare URL ends before a space, a comma or semicolon (`https://goproxy.cn,direct`), and before
# CJK punctuation and full-width forms (。，、（）「」…), which never belong to one.
_BARE_URL = re.compile(r"https?://[^\s<>\"',;\u2018-\u201f\u2026\u3000-\u303f\uff00-\uffef]+")
Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Note:
    """Something in the Markdown an email cannot show as written; `line` counts from 1."""

    level: Literal["error", "warning"]
    code: str
    line: int
    message: str


@cache
def parser() -> MarkdownIt:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.admon import admon_plugin
    from mdit_py_plugins.container import container_plugin

    from newsletter.markup.generators import generator_plugin

    # html on: raw HTML arrives as its own tokens, to be reported rather than shown as text.
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # Site generators' callouts: VuePress, VitePress and Docusaurus `::: warning Title` … `:::`
    # (any name: the reader says what it cannot show), MkDocs `!!! note "Title"` and `???`.
    container_plugin(md, "callout", validate=lambda params, *_: _named(params))
    admon_plugin(md)
    # Hugo shortcodes and Liquid tags, read as tags (generators.py), never shown as braces.
    generator_plugin(md)
    if hasattr(md.inline, "add_terminator_char"):
        md.inline.add_terminator_char("{")
    # A link's or an image's address that is a template expression (`{{ '/x/' | url }}`)
    # arrives whole, spaces and all, for addresses.py to resolve or to name.
    md.helpers = _TemplateAddresses()  # type: ignore[assignment]
    normalize = md.normalizeLink
    md.normalizeLink = lambda url: url if url.startswith("{{") else normalize(url)  # type: ignore[method-assign]
    # Every target arrives as a link; Reader refuses the unsafe ones with a Note, instead of
    # markdown-it showing `[text](javascript:…)` as literal text.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


class _TemplateAddresses:
    """markdown-it's link helpers, but for an address that opens with `{{`: read to its `}}`."""

    def __getattr__(self, name: str) -> Any:
        from markdown_it import helpers

        return getattr(helpers, name)

    @staticmethod
    def parseLinkDestination(text: str, start: int, maximum: int) -> Any:  # noqa: N802
        from markdown_it import helpers

        if text.startswith("{{", start):
            end = text.find("}}", start + 2, maximum)
            if end != -1:
                found = helpers.parseLinkDestination("<>", 0, 2)  # an empty result to fill
                found.str, found.pos, found.ok = text[start : end + 2], end + 2, True
                if found.pos < maximum and text[found.pos] not in " \t\n)":
                    # `{{ site.url }}/archive/`: the rest of the address, read as any address
                    rest = helpers.parseLinkDestination(text, found.pos, maximum)
                    if rest.ok:
                        found.str, found.pos = found.str + rest.str, rest.pos
                return found
        return helpers.parseLinkDestination(text, start, maximum)


def _named(params: str) -> bool:
    """A container's opening line names its kind: `::: tip`, `:::note Title`, `:::tip[Title]`."""
    name = params.strip()[:1]
    return name.isascii() and name.isalpha()


def callout_params(info: str) -> tuple[str, str]:
    """A container's kind and title as written after its `:::` (`warning 📜 Title`,
    `tip[Title]`, `details`)."""
    name, _, title = info.strip().partition(" ")
    if "[" in name:
        name, _, rest = name.partition("[")
        title = f"{rest} {title}".strip().removesuffix("]")
    return name.lower(), title.strip()


def closing(tokens: list[Token], start: int) -> int:
    """The index of the token that closes tokens[start]."""
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index
    return len(tokens) - 1


def too_deep(tokens: list[Token]) -> Token | None:
    """The first token at markdown-it's nesting limit, past which it drops the rest unsaid."""
    limit = int(parser().options["maxNesting"]) - 1
    return next((token for token in tokens if token.level >= limit), None)


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


def as_code(spans: list[Data]) -> list[Data]:
    """Spans inside <code> or <kbd> as code: their words in code spans, a link among them still
    a link (its words code), as `<code>[WebView](…)::[take_screenshot](…)</code>` shows."""
    out: list[Data] = []
    for span in spans:
        kind = span.get("kind")
        if kind == "link":
            inner = as_code(span["spans"])
            if inner:
                out.append({**span, "spans": inner})
        elif "spans" in span:
            for piece in as_code(span["spans"]):
                _add_code(out, piece)
        elif kind in ("text", "code"):
            _add_code(out, {"kind": "code", "text": span["text"]})
        elif kind == "image":
            out.append(span)
    return [s for s in out if s.get("kind") != "code" or s["text"]]


def _add_code(out: list[Data], piece: Data) -> None:
    if piece.get("kind") == "code" and out and out[-1].get("kind") == "code":
        out[-1] = {"kind": "code", "text": out[-1]["text"] + piece["text"]}
    else:
        out.append(piece)


def text_span(text: str) -> Data:
    return {"kind": "text", "text": text}


def bare_links(text: str) -> list[Data]:
    """Text with its bare http(s) URLs as links, as GitHub shows them."""
    pieces: list[Data] = []
    position = 0
    for found in _BARE_URL.finditer(text):
        url = _trim_url(found.group())
        if found.start() > position:
            pieces.append(text_span(text[position : found.start()]))
        pieces.append({"kind": "link", "url": url, "spans": [text_span(url)]})
        position = found.start() + len(url)
    if position < len(text):
        pieces.append(text_span(text[position:]))
    return pieces


def _trim_url(url: str) -> str:
    """A URL at the end of a sentence keeps its own closing parenthesis, not the sentence's."""
    while url and url[-1] in ".,:;!?'\")]}":
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url
