"""markdown-it configured for issue text; the Note type and the token helpers the readers share."""

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
