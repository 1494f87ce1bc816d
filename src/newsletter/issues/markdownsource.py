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

A list of links directly under a section (not under a ###) is a compact list: one item per entry,
its link the title. A `# Title` first line is the title (front matter may then leave it out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from newsletter.errors import Problem
from newsletter.issues.yamlsource import Loc, Source, read_yaml
from newsletter.markup import Note, Reader, closing
from newsletter.markup.document import parse_document

Data = dict[str, Any]
_FENCE = "---"


@dataclass
class MarkdownSource(Source):
    notes: list[Note] = field(default_factory=list)


def read_markdown(text: str, name: str) -> MarkdownSource:
    lines = text.splitlines()
    if not lines or lines[0].strip() != _FENCE:
        return MarkdownSource(
            problems=[
                Problem(
                    name,
                    1,
                    "",
                    "must start with front matter: a line ---, then number: N and title: …, "
                    "then another line ---",
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
    body = "\n".join(lines[close + 1 :])
    outline = _Outline(name, close + 2, data, source)
    outline.read(body)
    source.data = data
    return source


class _Outline:
    """The body's tokens split into intro, sections and items by their headings."""

    def __init__(self, name: str, first_line: int, data: Data, source: MarkdownSource) -> None:
        self.name = name
        self.data = data
        self.source = source
        self.reader = Reader(first_line)
        self.sections: list[Data] = []
        # Where blocks go now: the intro, a section's intro, or an item's summary.
        self.target: list[Any] | None = []
        self.target_loc: Loc = ("intro",)
        self.in_item = False

    def read(self, body: str) -> None:
        intro: list[Any] = []
        self.target = intro
        first_block = True
        base = self.reader.first_line
        for start, tokens in parse_document(body):
            self.reader.first_line = base + start  # the piece's lines count from its start
            index = 0
            while index < len(tokens):
                token = tokens[index]
                end = closing(tokens, index)
                line = self.reader.line_of(token)
                if token.type == "heading_open" and token.tag in ("h1", "h2", "h3"):
                    children = tokens[index + 1].children or []
                    self.heading(int(token.tag[1]), children, line, first_block)
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
        self.source.notes = self.reader.notes

    def problem(self, line: int | None, where: str, message: str) -> None:
        self.source.problems.append(Problem(self.name, line, where, message))

    def heading(self, level: int, children: list[Any], line: int, first_block: bool) -> None:
        spans = self.reader.title(children, line)
        if level == 1 and first_block:
            self.title(spans, line)
        elif level <= 2:  # a later # is a section too: weeklies put one above a last section
            loc: Loc = ("sections", len(self.sections))
            self.source.lines[loc] = line
            self.source.lines[(*loc, "title")] = line
            section: Data = {"title": spans, "intro": [], "items": []}
            self.sections.append(section)
            self.target, self.target_loc, self.in_item = section["intro"], (*loc, "intro"), False
        elif not self.sections:
            self.problem(
                line,
                "",
                "an item (###) comes before the first section (##): open a section first, or "
                "make it a #### heading",
            )
        else:
            self.item(spans, line)

    def title(self, spans: list[Data], line: int) -> None:
        text = "".join(_plain(spans)).strip()
        if "title" not in self.data:
            self.data["title"] = text
            self.source.lines[("title",)] = line
        elif str(self.data["title"]).strip() != text:
            self.problem(
                line,
                "title",
                f"is given twice, as {self.data['title']!r} in the front matter and as "
                f"# {text}; keep one",
            )

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

    def append(self, tokens: list[Any]) -> None:
        found: dict[Loc, int] = {}
        blocks = self.reader.blocks(tokens, (), 0, found)
        if not blocks:
            return
        if self.target is None:
            # Text after a compact list is an untitled item of its own, in its place.
            self.item([], self.reader.line_of(tokens[0]))
        assert self.target is not None
        start = len(self.target)
        for (place, *rest), line in found.items():
            assert isinstance(place, int)
            self.source.lines[(*self.target_loc, start + place, *rest)] = line
        self.target.extend(blocks)

    def compact_here(self, tokens: list[Any], index: int, end: int) -> bool:
        """A list of links right under a section: every entry starts with a link."""
        if not self.sections or self.in_item:
            return False
        cursor = index + 1
        while cursor < end:
            item_end = closing(tokens, cursor)
            inner = tokens[cursor + 1 : item_end]
            if not inner or inner[0].type != "paragraph_open":
                return False
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
