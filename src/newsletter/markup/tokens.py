"""markdown-it configured for issue text; the Note type, and the token and span helpers the
readers share."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported on first use: most YAML summaries never need the parser
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

Data = dict[str, Any]
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

    # html on: raw HTML arrives as its own tokens, to be reported rather than shown as text.
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    # Every target arrives as a link; Reader refuses the unsafe ones with a Note, instead of
    # markdown-it showing `[text](javascript:…)` as literal text.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


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
