"""A Markdown issue file in (issues/N.md); the same data as a YAML issue file out, with the line
of every value, every fault, and Notes for what the email cannot carry.

    ---
    number: 15
    title: Weekly 15           # the same keys as a YAML file, but for `sections`
    ---
    Intro text, images, quotes …           everything before the first ## is the intro
    ## Section                              opens a section; text before its first ### is its intro
    ### [Item title](https://…)            opens an item: a title that is one link links it
    The item's text: paragraphs, images, quotes, lists, code, #### headings.
    ###                                     an empty ### opens an untitled item (a quote, a note)

A weekly whose shallowest heading is ### (the title's `# heading` aside) is read one level up:
its ### headings are sections, its #### headings items.
A list of links right under a section's heading (nothing written between them), each entry one
paragraph starting with its link, is a compact list: one item per entry, its link the title.
A `# Title` first line is the title (front matter may then leave it out); under a front matter
title, it is a section. `base: https://…/42/` in the front matter is the page the weekly's own
site shows the issue at: relative links and images resolve against it. Titles that carry their
own numbers (`1、`, `2.`, `#12`) turn the email's numbering off for the issue, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from newsletter.errors import Problem
from newsletter.issues.yamlsource import Loc, Source, read_yaml
from newsletter.markup import Note, Reader, closing, describe_image
from newsletter.markup.document import parse_document

Data = dict[str, Any]
_FENCE = "---"
# A title's own number: "0、C 项目", "1. Rust", "3) x", "#12 …", "No. 4".
# "1.0 is out" is a version, not a number: a "." takes no digit after it.
_OWN_NUMBER = re.compile(r"\s*(?:\d+\s*(?:[、．)）:]|\.(?!\d))|#\d+|No\.\s*\d+)")


@dataclass
class MarkdownSource(Source):
    notes: list[Note] = field(default_factory=list)


# The keys a file's front matter starts with, as its problems name them: an issue's; a sequence
# step's are its own (it has no `number:`).
ISSUE_KEYS = "number: N and title: …"


def read_markdown(text: str, name: str, keys: str = ISSUE_KEYS) -> MarkdownSource:
    lines = text.splitlines()
    if not lines or lines[0].strip() != _FENCE:
        return MarkdownSource(
            problems=[
                Problem(
                    name,
                    1,
                    "",
                    f"must start with front matter: a line ---, then {keys}, then another line ---",
                )
            ]
        )
    close = next((i for i in range(1, len(lines)) if lines[i].strip() in (_FENCE, "...")), None)
    if close is None:
        return MarkdownSource(
            problems=[Problem(name, 1, "", "its front matter never ends: close it with a line ---")]
        )
    front = read_yaml("\n".join(lines[1:close]) + "\n", name, first_line=2)
    source = MarkdownSource(lines=front.lines, problems=front.problems, scalars=front.scalars)
    if front.problems:
        return source
    data = front.data if front.data is not None else {}
    if not isinstance(data, dict):
        source.problems.append(Problem(name, 2, "", "front matter must be keys and values"))
        return source
    if "sections" in data:
        source.problems.append(
            Problem(
                name,
                front.lines.get(("sections",)),
                "sections",
                "comes from the body's ## headings in a Markdown issue; remove it",
            )
        )
    base = _base(data, name, source)
    body = "\n".join(lines[close + 1 :])
    outline = _Outline(name, close + 2, data, source, base)
    outline.read(body)
    _own_numbers(data, source)
    source.data = data
    return source


def _base(data: Data, name: str, source: MarkdownSource) -> str:
    """The front matter's `base:` (taken out: it is how to read the body, not the issue's)."""
    base = data.pop("base", "")
    parts = urlsplit(base) if isinstance(base, str) else None
    if base and (parts is None or parts.scheme not in ("http", "https") or not parts.netloc):
        source.problems.append(
            Problem(
                name,
                source.lines.get(("base",)),
                "base",
                f"must be the https:// address the weekly's site shows this issue at, got "
                f"{base!r}: relative links and images resolve against it",
            )
        )
        return ""
    return str(base) if base else ""


def _own_numbers(data: Data, source: MarkdownSource) -> None:
    """Numbering off for this issue when most of its section titles, or most of its item
    titles, carry their own number (`0、C 项目`, `1. Rust`, `#12`): they would be numbered twice."""
    sections = data["sections"]
    groups = [
        [(s.get("title"), source.lines.get(("sections", n))) for n, s in enumerate(sections)],
        [
            (item.get("title"), source.lines.get(("sections", n, "items", i)))
            for n, section in enumerate(sections)
            for i, item in enumerate(section["items"])
            if item.get("title")
        ],
        # Entries numbered in their first line, under titles that are categories: "1、[x](…)".
        [
            (item["summary"][0].get("spans"), source.lines.get(("sections", n, "items", i)))
            for n, section in enumerate(sections)
            for i, item in enumerate(section["items"])
            if item.get("title") and item["summary"] and item["summary"][0]["kind"] == "paragraph"
        ],
    ]
    for titles in groups:
        numbered = [(title, line) for title, line in titles if _OWN_NUMBER.match(_text(title))]
        if "numbering" in data or len(numbered) < 2 or len(numbered) * 2 < len(titles):
            continue
        data["numbering"] = "none"
        title, line = numbered[0]
        shown = _text(title).strip()
        shown = shown if len(shown) <= 24 else f"{shown[:24]}…"
        source.notes.append(
            Note(
                "warning",
                "numbering",
                line or 1,
                f'{len(numbered)} titles carry their own numbers ("{shown}"), '
                "so the email does not number them again in this issue; set numbering: in the "
                "front matter to choose",
            )
        )


def _text(spans: Any) -> str:
    return "".join(_plain(spans)) if isinstance(spans, list) else ""


class _Outline:
    """The body's tokens split into intro, sections and items by their headings."""

    def __init__(
        self, name: str, first_line: int, data: Data, source: MarkdownSource, base: str
    ) -> None:
        self.name = name
        self.data = data
        self.source = source
        self.reader = Reader(first_line, base)
        self.sections: list[Data] = []
        # Where blocks go now: the intro, a section's intro, or an item's summary.
        self.target: list[Any] | None = []
        self.target_loc: Loc = ("intro",)
        self.in_item = False
        self.shift = 0  # 1: the body's sections are ### headings, its items ####

    def read(self, body: str) -> None:
        intro: list[Any] = []
        self.target = intro
        first_block = True
        base = self.reader.first_line
        pieces = parse_document(body)
        # A weekly whose every heading is ### or deeper has ### sections and #### items: its
        # headings are read one level up. Above that, `#` and `##` are both sections.
        shift = self.shift = 1 if self.shallowest(pieces) == 3 else 0
        for start, tokens in pieces:
            self.reader.first_line = base + start  # the piece's lines count from its start
            index = 0
            while index < len(tokens):
                token = tokens[index]
                end = closing(tokens, index)
                line = self.reader.line_of(token)
                level = int(token.tag[1]) if token.type == "heading_open" else 0
                if token.type == "heading_open" and token.markup == "-":
                    # A line, then `---` alone under it: a weekly's divider after the line,
                    # not a section named by it (CommonMark's setext heading).
                    self.divided(tokens[index + 1], line)
                elif (level == 1 and first_block) or 1 <= level - shift <= 3:
                    children = tokens[index + 1].children or []
                    self.heading(max(level - shift, 1), children, line, first_block)
                elif token.type in (
                    "bullet_list_open",
                    "ordered_list_open",
                ) and self.compact_here(tokens, index, end):
                    self.compact(tokens, index, end)
                else:
                    self.append(tokens[index : end + 1])
                first_block = False
                index = end + 1
        if intro:
            if "intro" in self.data:
                self.problem(
                    self.source.lines.get(("intro",)),
                    "intro",
                    "is given twice: in the front matter and before the first ##; keep one",
                )
            else:
                self.data["intro"] = intro
        self.data["sections"] = self.sections
        self.footnotes()
        self.source.notes += self.reader.notes

    def footnotes(self) -> None:
        """The footnotes' "Notes" at the end of the issue: its outro, or after its last words
        when the front matter has one."""
        notes = self.reader.inline.footnotes
        blocks = notes.blocks(lambda text, line: self.reader.note("warning", "markup", line, text))
        if not blocks:
            return
        line = min(notes.first_lines.values(), default=self.reader.first_line)
        if "outro" in self.data:
            self.add(blocks, {(n,): line for n in range(len(blocks))}, line)
            return
        self.data["outro"] = blocks
        for n in range(len(blocks)):
            self.source.lines[("outro", n)] = line

    def shallowest(self, pieces: list[tuple[int, list[Any]]]) -> int:
        """The shallowest heading level (1 to 3) the body's own headings use, the title's
        `# heading` aside; 0 if it has none."""
        levels = set()
        for number, (_, tokens) in enumerate(pieces):
            for index, token in enumerate(tokens):
                if token.type != "heading_open" or token.level or token.markup == "-":
                    continue
                if number == index == 0 and token.tag == "h1":
                    written = tokens[1].content.strip()
                    if "title" not in self.data or str(self.data["title"]).strip() == written:
                        continue
                levels.add(int(token.tag[1]))
        return min((level for level in levels if level <= 3), default=0)

    def problem(self, line: int | None, where: str, message: str) -> None:
        self.source.problems.append(Problem(self.name, line, where, message))

    def heading(self, level: int, children: list[Any], line: int, first_block: bool) -> None:
        spans = self.reader.title(children, line)
        if not spans and level <= 2:
            return  # `##` with nothing after it (or a `---` under a blank title) opens nothing
        if level == 1 and first_block and self.is_title(spans):
            self.title(spans, line)
        elif level <= 2:  # a later # is a section too: weeklies put one above a last section
            loc: Loc = ("sections", len(self.sections))
            self.source.lines[loc] = line
            self.source.lines[(*loc, "title")] = line
            section: Data = {"title": spans, "intro": [], "items": []}
            self.sections.append(section)
            self.target, self.target_loc, self.in_item = section["intro"], (*loc, "intro"), False
        elif not self.sections:
            item, opener = "#" * (3 + self.shift), "#" * (2 + self.shift)
            self.problem(
                line,
                "",
                f"an item ({item}) comes before the first section ({opener}): open a section "
                f"first, or make it a {item}# heading",
            )
        else:
            self.item(spans, line)

    def is_title(self, spans: list[Data]) -> bool:
        """A first `# heading` is the title, unless the front matter has another: then it is
        the first section, as pasted weeklies head their first part."""
        text = "".join(_plain(spans)).strip()
        return "title" not in self.data or str(self.data["title"]).strip() == text

    def title(self, spans: list[Data], line: int) -> None:
        if "title" not in self.data:
            self.data["title"] = "".join(_plain(spans)).strip()
            self.source.lines[("title",)] = line

    def item(self, spans: list[Data], line: int) -> None:
        section = self.sections[-1]
        loc: Loc = ("sections", len(self.sections) - 1, "items", len(section["items"]))
        item: Data = {"summary": []}
        if len(spans) == 1 and spans[0]["kind"] == "link":
            # `### [Title](https://…)`: the title is the link.
            item["url"], spans = spans[0]["url"], spans[0]["spans"]
        if spans:
            item["title"] = spans
        section["items"].append(item)
        self.source.lines[loc] = line
        self.source.lines[(*loc, "title")] = line
        self.target, self.target_loc, self.in_item = item["summary"], (*loc, "summary"), True

    def divided(self, inline: Any, line: int) -> None:
        blocks = [*self.reader.paragraph(inline, line), {"kind": "rule"}]
        self.add(blocks, {(n,): line for n in range(len(blocks))}, line)

    def append(self, tokens: list[Any]) -> None:
        found: dict[Loc, int] = {}
        blocks = self.reader.blocks(tokens, (), 0, found)
        self.add(blocks, found, self.reader.line_of(tokens[0]))

    def add(self, blocks: list[Data], found: dict[Loc, int], line: int) -> None:
        """`blocks` (their lines in `found`) into where text goes now."""
        if not blocks:
            return
        if self.target is None:
            # Text after a compact list is an untitled item of its own, in its place.
            self.item([], line)
        assert self.target is not None
        if self.target:
            describe_image(self.target[-1], blocks[0])  # a caption line under an image
        start = len(self.target)
        for (place, *rest), at in found.items():
            assert isinstance(place, int)
            self.source.lines[(*self.target_loc, start + place, *rest)] = at
        self.target.extend(blocks)

    def compact_here(self, tokens: list[Any], index: int, end: int) -> bool:
        """A list of links right under a section's heading: every entry one paragraph that
        starts with a link. After the section's own words, a list is a list."""
        if not self.sections or self.in_item:
            return False
        section = self.sections[-1]
        if self.target is not section["intro"] or section["intro"] or section["items"]:
            return False
        cursor = index + 1
        while cursor < end:
            item_end = closing(tokens, cursor)
            inner = tokens[cursor + 1 : item_end]
            if not inner or inner[0].type != "paragraph_open":
                return False
            if sum(t.type == "paragraph_open" for t in inner if t.level == inner[0].level) > 1:
                return False  # an entry of paragraphs is an entry, not a title
            children = inner[1].children or []
            if not children or children[0].type != "link_open":
                return False
            cursor = item_end + 1
        return True

    def compact(self, tokens: list[Any], index: int, end: int) -> None:
        """One title-only item per entry; what follows its link in the entry is its text."""
        cursor = index + 1
        while cursor < end:
            item_end = closing(tokens, cursor)
            inner = tokens[cursor + 1 : item_end]
            line = self.reader.line_of(tokens[cursor])
            paragraph_end = closing(inner, 0)
            self.item(self.reader.title(inner[1].children or [], line), line)
            if inner[paragraph_end + 1 :]:
                self.append(inner[paragraph_end + 1 :])
            cursor = item_end + 1
        self.target, self.in_item = None, False


def _plain(spans: list[Data]) -> list[str]:
    out = []
    for span in spans:
        if span["kind"] in ("text", "code"):
            out.append(span["text"])
        elif span["kind"] == "break":
            out.append(" ")
        else:
            out += _plain(span.get("spans", []))
    return out
