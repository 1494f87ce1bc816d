"""A whole Markdown issue's body in; its tokens out, in pieces that are each parsed once and
remembered, so that a save which changes one section parses only that section again.

The body is cut before each `#` or `##` heading that follows a blank line outside fenced code,
comments and raw HTML blocks: a place where CommonMark starts afresh, so the pieces parse as the
whole does. Reference-style links are the exception, since a definition anywhere serves a link
anywhere: every piece's definitions are gathered first (the block pass alone) and each piece is
parsed with all of them. The preview re-renders a 150-item weekly on every save, and reading it
whole with markdown-it-py each time would take most of the save's budget (benchmarks/render.py).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from newsletter.markup.tokens import parser

if TYPE_CHECKING:
    from markdown_it.token import Token

Piece = tuple[int, list["Token"]]  # the line (from 0) a piece starts on, and its tokens
_HEADING = re.compile(r"#{1,2}(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# CommonMark's raw HTML blocks that run over blank lines, by how they open and close.
_RAW_BLOCKS = (
    (
        re.compile(r" {0,3}<(?:script|pre|style|textarea)(?:\s|>|$)", re.I),
        re.compile(r"</(?:script|pre|style|textarea)>", re.I),
    ),
    (re.compile(r" {0,3}<!--"), re.compile(r"-->")),
    (re.compile(r" {0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r" {0,3}<![A-Za-z]"), re.compile(r">")),
    (re.compile(r" {0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
)
_CACHED = 512  # pieces remembered: a few issues' worth


def parse_document(text: str) -> list[Piece]:
    """`text` as markdown-it tokens, piece by piece (see the module docstring)."""
    pieces = cut(text)
    references: dict[str, tuple[tuple[str, Any], ...]] = {}
    for _, piece in pieces:
        for label, value in _definitions(piece):
            references.setdefault(label, value)  # the first definition wins, as in CommonMark
    known = tuple(references.items())
    return [(start, _tokens(piece, known)) for start, piece in pieces]


def cut(text: str) -> list[tuple[int, str]]:
    """`text` in pieces, each with the line it starts on."""
    lines = text.split("\n")
    pieces: list[tuple[int, str]] = []
    start, fence, closes, blank = 0, "", None, True
    for number, line in enumerate(lines):
        if fence:
            stripped = line.strip()
            if (
                stripped.startswith(fence[0])
                and set(stripped) == {fence[0]}
                and len(stripped) >= len(fence)
            ):
                fence = ""
        elif closes is not None:
            if closes.search(line):
                closes = None
        elif (found := _FENCE.match(line)) is not None:
            fence = found.group(1)
        else:
            for opens, closing in _RAW_BLOCKS:
                match = opens.match(line)
                if match:
                    if not closing.search(line, match.end()):
                        closes = closing
                    break
            else:
                if blank and number > start and _HEADING.match(line):
                    pieces.append((start, "\n".join(lines[start:number])))
                    start = number
        blank = not line.strip()
    pieces.append((start, "\n".join(lines[start:])))
    return pieces


@lru_cache(maxsize=_CACHED)
def _definitions(piece: str) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """The reference definitions a piece makes: markdown-it's block pass alone."""
    md = parser()
    env: dict[str, Any] = {}
    source = piece.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")
    md.block.parse(source, md, env, [])
    found = env.get("references", {})
    # A link needs its definition's target and title; where it stood does not travel.
    return tuple(
        (label, (("href", value.get("href")), ("title", value.get("title"))))
        for label, value in found.items()
    )


@lru_cache(maxsize=_CACHED)
def _tokens(
    piece: str, references: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
) -> list[Token]:
    """A piece's tokens, read with every definition of the document. Shared: never change them."""
    env = {"references": {label: dict(value) for label, value in references}}
    return parser().parse(piece, env)
