"""Markdown text in (CommonMark, read by markdown-it-py); the issue's content as plain data out,
with the line of every block and a Note for whatever an email cannot carry.

The data has the shape of content.py's values (`{"kind": "paragraph", "spans": [...]}`), which
validate it. Nothing the editor wrote is lost without a word: HTML in the Markdown is read into
the same blocks and spans (an image, a link, a centred paragraph, a table); what an email cannot
carry (a script, a form, an MDX component) is a Note at its line; an HTML comment, which no
reader ever sees, is dropped.
Line breaks inside a paragraph join Chinese and Japanese text without a space, as they are
written; bare http(s) URLs become links, as on GitHub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from newsletter.markup.blocks import Reader
from newsletter.markup.htmlblocks import describe_image
from newsletter.markup.tokens import Data, Loc, Note, closing, parser, text_span

__all__ = [
    "Data",
    "Loc",
    "Note",
    "Parsed",
    "Reader",
    "closing",
    "describe_image",
    "parse_content",
    "parse_inline",
    "parser",
]

# Text that holds none of these is one paragraph of plain text: no parser needed.
_MARKS = re.compile(r"[*_`\[\]\\<>&~|!]|https?:|\n|^\s|^[#>+=-]|^\d+[.)]")


@dataclass
class Parsed:
    blocks: list[Data] = field(default_factory=list)
    # The line of each block, by its place in `blocks`: (2,), (2, "items", 0, 1), …
    lines: dict[Loc, int] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)


def parse_content(text: str, first_line: int = 1) -> Parsed:
    """`text` as blocks; lines count from `first_line` (the line the text starts on)."""
    if not text.strip():
        return Parsed()
    if not _MARKS.search(text):
        return Parsed(
            [{"kind": "paragraph", "spans": [text_span(text.strip())]}], {(0,): first_line}
        )
    reader = Reader(first_line)
    parsed = Parsed()
    parsed.blocks = reader.blocks(parser().parse(text), (), 0, parsed.lines)
    # A field's footnotes (a YAML summary's) are noted at the field's end.
    warn = lambda text, line: reader.note("warning", "markup", line, text)  # noqa: E731
    for block in reader.inline.footnotes.blocks(warn):
        parsed.lines[(len(parsed.blocks),)] = first_line
        parsed.blocks.append(block)
    parsed.notes = reader.notes
    return parsed


def parse_inline(text: str, line: int = 1) -> tuple[list[Data], list[Note]]:
    """One line of inline Markdown (a title) as spans."""
    if not _MARKS.search(text):
        return [text_span(text)], []
    reader = Reader(line)
    tokens = parser().parseInline(text)
    children = tokens[0].children if tokens and tokens[0].children else []
    return reader.title(children, line), reader.notes
