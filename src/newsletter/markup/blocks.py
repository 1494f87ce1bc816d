"""Block tokens in; block data out (paragraphs, headings, images, quotes, callouts, lists, code,
rules, tables, and HTML blocks read into the same), each block's line recorded, and a Note for
whatever an email cannot carry (a script, a form, an MDX component or `import`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from newsletter.markup.footnotes import definition_label
from newsletter.markup.generators import tag_spans
from newsletter.markup.html import follow_containers
from newsletter.markup.htmlblocks import HtmlReader, describe_image, without_breaks
from newsletter.markup.spans import SpanReader
from newsletter.markup.tokens import (
    Data,
    Loc,
    Note,
    callout_params,
    closing,
    parser,
    too_deep,
    trimmed,
)

if TYPE_CHECKING:
    from markdown_it.token import Token

# Lists and quotes inside lists and quotes: deeper than this is read one level up.
MAX_DEPTH = 3


class Reader:
    """markdown-it's token stream -> block and span data, collecting Notes on the way."""

    def __init__(self, first_line: int, base: str = "") -> None:
        self.first_line = first_line
        self.notes: list[Note] = []
        self.inline = SpanReader(self.note, base)
        self.html = HtmlReader(self.inline)
        # Containers an HTML block opened and a later one closes: `<div align="center">`, the
        # Markdown, `</div>`. The Markdown in between is centred, as the weekly's site shows it.
        self.open_html: list[tuple[str, bool]] = []

    def line_of(self, token: Token) -> int:
        return self.first_line + (token.map[0] if token.map else 0)

    def note(self, level: Literal["error", "warning"], code: str, line: int, text: str) -> None:
        self.notes.append(Note(level, code, line, text))

    def blocks(self, tokens: list[Token], at: Loc, depth: int, lines: dict[Loc, int]) -> list[Data]:
        """The blocks in `tokens`, their lines recorded in `lines` under `at` + their index."""
        if depth == 0:
            deep = too_deep(tokens)
            if deep is not None:
                self.note(
                    "error",
                    "markup",
                    self.line_of(deep),
                    "quotes or lists are nested so deep here that Markdown stops reading them "
                    "and what is inside is lost; nest them less",
                )
        out: list[Data] = []
        index = 0
        while index < len(tokens):
            token = tokens[index]
            end = closing(tokens, index) if token.nesting == 1 else index
            line = self.line_of(token)
            centre = any(centres for _, centres in self.open_html)
            found = self.block(tokens, index, end, at, len(out), depth, lines)
            if token.type == "html_block":
                follow_containers(token.content, self.open_html)
            if centre:
                found = [_centred(block) for block in found]
            if out and found:
                describe_image(out[-1], found[0])
            for block in found:
                lines.setdefault((*at, len(out)), line)
                out.append(block)
            index = end + 1
        return out

    def block(
        self,
        tokens: list[Token],
        index: int,
        end: int,
        at: Loc,
        place: int,
        depth: int,
        lines: dict[Loc, int],
    ) -> list[Data]:
        token = tokens[index]
        kind, line = token.type, self.line_of(token)
        if kind == "paragraph_open":
            return self.paragraph(tokens[index + 1], line)
        if kind == "heading_open":
            spans = self.title(tokens[index + 1].children or [], line)
            return (
                [{"kind": "heading", "level": int(token.tag[1]), "spans": spans}] if spans else []
            )
        if kind in ("bullet_list_open", "ordered_list_open"):
            return self.list_block(tokens, index, end, (*at, place), depth, lines)
        if kind == "blockquote_open":
            inner_at = (*at, place, "blocks") if depth < MAX_DEPTH else at
            inner = self.blocks(tokens[index + 1 : end], inner_at, depth + 1, lines)
            if depth >= MAX_DEPTH:
                self.note("warning", "markup", line, "a quote nested this deep is shown unquoted")
                return inner
            return [{"kind": "quote", "blocks": inner}] if inner else []
        if kind in ("container_callout_open", "admonition_open"):
            return self.callout(tokens[index : end + 1], (*at, place), depth, lines)
        if kind in ("fence", "code_block"):
            language = token.info.split()[0] if token.info.strip() else ""
            return [
                {"kind": "code_block", "text": token.content.rstrip("\n"), "language": language}
            ]
        if kind == "generator":  # a shortcode on a line of its own: its image or its link
            pieces = tag_spans(token.meta, self.inline, line)
            return [
                p if p["kind"] == "image" else {"kind": "paragraph", "spans": [p]} for p in pieces
            ]
        if kind == "hr":
            return [{"kind": "rule"}]
        if kind == "html_block":
            return self.html.blocks(token.content, line)
        if kind == "table_open":
            return self.table(tokens[index : end + 1], line)
        return []

    def list_block(
        self,
        tokens: list[Token],
        index: int,
        end: int,
        at: Loc,
        depth: int,
        lines: dict[Loc, int],
    ) -> list[Data]:
        opening = tokens[index]
        entries: list[list[Data]] = []
        tight = True
        cursor = index + 1
        nested = depth >= MAX_DEPTH or self._lists_above(at) >= 2
        while cursor < end:
            item_end = closing(tokens, cursor)
            inner = tokens[cursor + 1 : item_end]
            tight = tight and all(t.hidden for t in inner if t.type == "paragraph_open")
            entry_at = at if nested else (*at, "items", len(entries))
            entries.append(self.blocks(inner, entry_at, depth + 1, lines))
            cursor = item_end + 1
        if nested:
            self.note(
                "warning",
                "markup",
                self.line_of(opening),
                "lists nest one level in an email: this third level is shown as paragraphs",
            )
            return [block for entry in entries for block in entry]
        entries = [entry for entry in entries if entry]
        if not entries:
            return []
        start = int(opening.attrGet("start") or 1) if opening.type == "ordered_list_open" else 1
        ordered = opening.type == "ordered_list_open"
        return [
            {"kind": "list", "ordered": ordered, "start": start, "tight": tight, "items": entries}
        ]

    def callout(
        self, tokens: list[Token], at: Loc, depth: int, lines: dict[Loc, int]
    ) -> list[Data]:
        """A container (`::: warning Title`) or an admonition (`!!! note "Title"`, `???` shown
        open) as a callout: its kind, its title, its body. `::: right`, `::: center`, VitePress'
        `::: code-group` (tabs of code) and `::: v-pre` only place or group what they hold:
        their blocks are shown as they are."""
        opening, line = tokens[0], self.line_of(tokens[0])
        body = tokens[1:-1]
        children: list[Token] = []
        if opening.type == "admonition_open":
            tone = str(opening.meta.get("tag", "note")).lower()
            if body and body[0].type == "admonition_title_open":
                title_end = closing(body, 0)
                if '"' in opening.info:  # else the plugin's own default: the kind's name
                    children = body[1].children or []
                body = body[title_end + 1 :]
        else:
            tone, title = callout_params(opening.info)
            if title:
                parsed = parser().parseInline(title)
                children = (parsed[0].children or []) if parsed else []
        if tone in _LAYOUT:
            inner = self.blocks(body, at, depth + 1, lines)
            return [_centred(block) for block in inner] if tone == "center" else inner
        spans = self.title(children, line)
        inner = self.blocks(body, (*at, "blocks"), depth + 1, lines)
        if not inner:
            return (
                [{"kind": "paragraph", "spans": [{"kind": "strong", "spans": spans}]}]
                if spans
                else []
            )
        callout: Data = {"kind": "callout", "tone": _tone(tone), "blocks": inner}
        if spans:
            callout["title"] = spans
        return [callout]

    @staticmethod
    def _lists_above(at: Loc) -> int:
        return sum(1 for part in at if part == "items")

    def table(self, tokens: list[Token], line: int) -> list[Data]:
        """A Markdown pipe table: its header row, then its rows, each cell as blocks."""
        head: list[list[Data]] = []
        rows: list[list[list[Data]]] = []
        row: list[list[Data]] = []
        in_head = False
        for token in tokens:
            if token.type in ("thead_open", "thead_close"):
                in_head = token.type == "thead_open"
            elif token.type == "tr_open":
                row = []
            elif token.type == "inline":
                cell_line = self.line_of(token) if token.map else line
                row.append(self.paragraph(token, cell_line))
            elif token.type == "tr_close":
                if in_head:
                    head = row
                else:
                    rows.append(row)
        return [{"kind": "table", "head": head, "rows": rows}] if head or rows else []

    def paragraph(self, inline: Token, line: int) -> list[Data]:
        """A paragraph's spans; an image among them becomes a block of its own, splitting it."""
        if _mdx_module_lines(inline.content):
            lines = inline.content.strip().splitlines()
            shown = ", ".join(repr(line.strip()[:50]) for line in lines[:3])
            self.note(
                "warning",
                "markup",
                line,
                f"MDX {'lines' if len(lines) > 1 else 'line'} {shown}"
                f"{' …' if len(lines) > 3 else ''} left out of the email: code the site's page "
                "loads, which no reader of an email sees",
            )
            return []
        written = inline.content.strip()
        if len(written) >= 3 and set(written) == {":"}:
            # A container's closing line with no container open: the site shows it as
            # written (markdown-it-container closes at the first one it meets).
            self.note(
                "warning",
                "markup",
                line,
                f"{written!r} closes no container (the one above closed at an earlier "
                f"{written!r}), so it is left out of the email: delete it, or close the inner "
                "container with more colons than the outer one opens with",
            )
            return []
        definitions = _definitions(inline.children or [])
        if definitions:
            for label, tokens in definitions:
                spans = self.inline.spans(tokens, line, allow_images=False)
                self.inline.footnotes.define(label, trimmed(spans))
            return []
        out: list[Data] = []
        run: list[Data] = []
        for piece in self.inline.spans(inline.children or [], line, allow_images=True):
            if piece.get("kind") == "image":
                _flush(run, out)
                out.append(piece)
            else:
                run.append(piece)
        _flush(run, out)
        if len(out) > 1 and out[0].get("kind") == "image":  # a line under a paragraph's image
            describe_image(out[0], out[1])
        return out

    def title(self, children: list[Token], line: int) -> list[Data]:
        return self.inline.title(children, line)


def _mdx_module_lines(text: str) -> bool:
    """Every line an MDX `import … from '…'` or `export …`: code the site loads, not words."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(lines) and all(
        (line.startswith("import ") and (" from " in line or line[7:8] in "'\""))
        or line.startswith("export ")
        for line in lines
    )


def _definitions(children: list[Token]) -> list[tuple[str, list[Token]]]:
    """A paragraph of footnote definitions (`[^s3]: text`, one a line, a line that opens with
    none continuing the one above) as each one's label and tokens; none if it opens with none."""
    found: list[tuple[str, list[Token]]] = []
    starts_line = True
    for token in children:
        label = definition_label(token.content) if starts_line and token.type == "text" else None
        if label is not None:
            # Tokens are shared (parses are cached): the label is cut from a copy.
            found.append((label[0], [token.copy(content=token.content[label[1] :])]))
        elif not found:
            return []
        else:
            found[-1][1].append(token)
        starts_line = token.type in ("softbreak", "hardbreak")
    return found


# Containers that place or group their blocks rather than call them out.
_LAYOUT = frozenset({"right", "center", "left", "justify", "code-group", "v-pre", "raw"})


def _tone(name: str) -> str:
    """A callout's kind as a name the email knows how to colour and to say (note, if none)."""
    kept = "".join(c for c in name.lower() if c.isascii() and (c.isalnum() or c in "_-"))[:32]
    return kept if kept[:1].isalpha() else "note"


def _centred(block: Data) -> Data:
    """A paragraph centred (other blocks keep their place: an email centres only text)."""
    return {**block, "align": "center"} if block.get("kind") == "paragraph" else block


def _flush(run: list[Data], out: list[Data]) -> None:
    spans = trimmed(run)
    if spans and not all(s.get("kind") == "break" for s in spans):
        out.append({"kind": "paragraph", "spans": without_breaks(spans)})
    run.clear()
