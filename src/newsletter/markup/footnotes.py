"""Markdown footnotes as a weekly's site shows them, made for an email: each reference
(`[^s3]`) a superscript number in the words, and the definitions (`[^s3]: text`) a "Notes"
list at the end of the issue, numbered in the order the references first appear.

A definition that is one word or one address alone (`[^1]: https://…`) is, to CommonMark, a
link reference definition, and its reference a link with the text `^1`: the span reader hands
that link here as the note's text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from newsletter.markup.tokens import Data

# A reference: `[^label]`, the label without spaces or brackets; a definition opens a paragraph
# with one and a colon.
_REFERENCE = re.compile(r"\[\^([^\]\s\[]+)\]")
_DEFINITION = re.compile(r"\[\^([^\]\s\[]+)\]:[ \t]*")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def definition_label(text: str) -> tuple[str, int] | None:
    """A footnote definition's label and where its text starts, if `text` opens with one."""
    found = _DEFINITION.match(text)
    return (found.group(1), found.end()) if found else None


def superscript(number: int) -> str:
    return str(number).translate(_SUPERSCRIPT)


class Footnotes:
    """The document's footnotes: labels numbered as they are first referred to, and the text
    each definition gives."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.first_lines: dict[str, int] = {}
        self.texts: dict[str, list[Data]] = {}

    def number(self, label: str, line: int) -> str:
        """The superscript number of `label`'s note, numbered on its first reference."""
        if label not in self.numbers:
            self.numbers[label] = len(self.numbers) + 1
            self.first_lines[label] = line
        return superscript(self.numbers[label])

    def split(self, text: str, line: int) -> list[str]:
        """`text` with its references as superscript numbers: the words between them and the
        numbers, in order."""
        pieces: list[str] = []
        position = 0
        for found in _REFERENCE.finditer(text):
            pieces += [text[position : found.start()], self.number(found.group(1), line)]
            position = found.end()
        pieces.append(text[position:])
        return [piece for piece in pieces if piece]

    def linked(self, link: Data, line: int) -> str | None:
        """A link whose words are `^label` alone: a reference whose definition is one address
        (CommonMark read it as a link). Its superscript number; None for any other link."""
        spans = link["spans"]
        words = str(spans[0].get("text", "")).strip() if len(spans) == 1 else ""
        if not words.startswith("^") or not words[1:] or " " in words:
            return None
        self.define(words[1:], [{**link, "spans": [{"kind": "text", "text": link["url"]}]}])
        return self.number(words[1:], line)

    def define(self, label: str, spans: list[Data]) -> None:
        self.texts.setdefault(label, spans)  # the first definition wins, as for links

    def blocks(self, note: Callable[[str, int], None]) -> list[Data]:
        """The "Notes" heading line and list, or none; a reference without a definition is
        told to `note` (its message and line) and its entry says so."""
        if not self.numbers and not self.texts:
            return []
        for label in self.texts:
            self.numbers.setdefault(label, len(self.numbers) + 1)  # defined, never referred to
        entries: list[list[Data]] = []
        for label, _ in sorted(self.numbers.items(), key=lambda pair: pair[1]):
            spans = self.texts.get(label)
            if spans is None:
                note(
                    f"the footnote [^{label}] has no definition: add a line `[^{label}]: its "
                    "text` (its number's note says it is missing)",
                    self.first_lines[label],
                )
                spans = [{"kind": "text", "text": f"[^{label}]: no note was written"}]
            entries.append([{"kind": "paragraph", "spans": spans}])
        title: Data = {"kind": "strong", "spans": [{"kind": "text", "text": "Notes"}]}
        notes: Data = {"kind": "list", "ordered": True, "start": 1, "tight": True}
        return [{"kind": "paragraph", "spans": [title]}, {**notes, "items": entries}]
