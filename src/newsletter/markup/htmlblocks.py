"""An HTML block of the Markdown (`<p align="center"><img …></p>`, `<h3 id=…>`, `<video>`, a
<table>, `<details>`) -> the same block data as Markdown makes: paragraphs (centred where the
HTML centres them), headings, images, quotes, lists, code, tables, and a link for a player.

What an email cannot carry (a script, a form, an MDX component) is a Note at its line naming
what went; the words around it stay. A tag this reader does not know keeps its words.
"""

from __future__ import annotations

from newsletter.markup.generators import tag_spans, tags_in
from newsletter.markup.html import (
    CODES,
    DROPPED,
    MEDIA,
    STYLES,
    Element,
    centred,
    names,
    read_fragment,
)
from newsletter.markup.spans import SpanReader, wide
from newsletter.markup.tokens import Data, as_code, hoist_images, trimmed

_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CONTAINERS = names("div center section article header footer main aside nav figure details dl dd")
_PARAGRAPHS = frozenset({"p", "figcaption", "dt", "caption"})


class HtmlReader:
    """HTML fragments -> block data, through the span reader's links, images and Notes."""

    def __init__(self, spans: SpanReader) -> None:
        self.spans = spans

    def blocks(self, html: str, line: int) -> list[Data]:
        """The blocks of one HTML block that starts at `line`."""
        root = read_fragment(html)
        out: list[Data] = []
        self._children(root, out, line - 1, centre=False)
        return out

    def _children(self, element: Element, out: list[Data], offset: int, *, centre: bool) -> None:
        """`element`'s children as blocks: runs of inline content become paragraphs."""
        run: list[Data] = []
        for child in element.children:
            if isinstance(child, str):
                self._words(run, child, offset + element.line)
            elif child.component:
                self.spans.left_out(child.shown, "an MDX component", offset + child.line)
                self._children(child, out, offset, centre=centre)  # its words stay
            elif child.name in DROPPED:
                self._flush(run, out, centre)
                self.spans.left_out(child.shown, "HTML", offset + child.line)
            elif child.name in _HEADINGS or child.name in _PARAGRAPHS or child.name in _BLOCKISH:
                self._flush(run, out, centre)
                self._block(child, out, offset, centre=centre)
            else:
                self._inline(child, run, offset)
        self._flush(run, out, centre)

    def _block(self, element: Element, out: list[Data], offset: int, *, centre: bool) -> None:
        name, line = element.name, offset + element.line
        centre = centre or centred(element.attrs)
        if name in _HEADINGS:
            run: list[Data] = []
            self._inline_children(element, run, offset)
            spans = [s for s in hoist_images(run) if s.get("kind") != "image"]
            if trimmed(spans):
                out.append({"kind": "heading", "level": _HEADINGS[name], "spans": trimmed(spans)})
            out.extend(s for s in hoist_images(run) if s.get("kind") == "image")
        elif name == "summary":  # a <details>' summary, shown open: its line in bold
            run = []
            self._inline_children(element, run, offset)
            self._flush([{"kind": "strong", "spans": trimmed(run)}] if run else [], out, centre)
        elif name == "blockquote":
            inner: list[Data] = []
            self._children(element, inner, offset, centre=False)
            if inner:
                out.append({"kind": "quote", "blocks": inner})
        elif name in ("ul", "ol"):
            self._list(element, out, offset)
        elif name == "pre":
            text = element.text().strip("\n")
            if text.strip():
                out.append({"kind": "code_block", "text": text, "language": ""})
        elif name == "hr":
            out.append({"kind": "rule"})
        elif name == "table":
            self._table(element, out, offset)
        elif name in MEDIA:
            self._media(element, out, line)
        else:  # p, div, center, figure, details, li and cells outside their table, …
            self._children(element, out, offset, centre=centre)

    def _inline(self, element: Element, run: list[Data], offset: int) -> None:
        """An inline element's spans into `run` (an image among them, as image data)."""
        name, line = element.name, offset + element.line
        if name == "br":
            run.append({"kind": "break"})
        elif name == "img":
            image = self.spans.html_image(element.attrs, line)
            if image is not None:
                run.append(image)
        elif name == "a":
            target = self.spans.link_target(element.attrs.get("href", ""), line)
            inner: list[Data] = []
            self._inline_children(element, inner, offset)
            if target is None:
                run.extend(inner)
                return
            # A sponsor's logo and name in one <a>: the logo links there, and so do the words.
            images = [{**s, "href": target} for s in hoist_images(inner) if s["kind"] == "image"]
            words = without_breaks([s for s in hoist_images(inner) if s["kind"] != "image"])
            run.extend(images)
            if words:
                run.append({"kind": "link", "url": target, "spans": words})
        elif name in STYLES:
            inner = []
            self._inline_children(element, inner, offset)
            if inner:
                run.append({"kind": STYLES[name], "spans": inner})
        elif name in CODES:  # its words as code, a link among them still a link
            inner = []
            self._inline_children(element, inner, offset)
            run.extend(as_code(trimmed(inner)))
        else:  # <span>, <sub>, <small>, an unknown tag: its words, without its look
            self._inline_children(element, run, offset)

    def _inline_children(self, element: Element, run: list[Data], offset: int) -> None:
        for child in element.children:
            if isinstance(child, str):
                self._words(run, child, offset + element.line)
            elif child.component or child.name in DROPPED:
                what = "an MDX component" if child.component else "HTML"
                self.spans.left_out(child.shown, what, offset + child.line)
                if child.component:
                    self._inline_children(child, run, offset)
            elif child.name in MEDIA:
                link = self._media_link(child, offset + child.line)
                if link is not None:
                    run.append(link)
            else:
                self._inline(child, run, offset)

    def _words(self, run: list[Data], text: str, line: int) -> None:
        """An HTML text's words; a site's tag among them (`<center>{{< tweet 1 >}}</center>`)
        what it stands for, as in Markdown (generators.py), at its element's line."""
        for piece in tags_in(text):
            if isinstance(piece, str):
                _add_words(run, piece, self.spans)
            else:
                run.extend(tag_spans(piece, self.spans, line))

    def _flush(self, run: list[Data], out: list[Data], centre: bool) -> None:
        """A run of spans as paragraphs, an image among them a block of its own."""
        text: list[Data] = []
        start = len(out)
        for piece in hoist_images(run):
            if piece.get("kind") == "image":
                _paragraph(text, out, centre)
                out.append(piece)
            else:
                text.append(piece)
        _paragraph(text, out, centre)
        run.clear()
        if len(out) > start + 1 and out[start].get("kind") == "image":
            describe_image(out[start], out[start + 1])  # a line under an image: its caption

    def _list(self, element: Element, out: list[Data], offset: int) -> None:
        entries: list[list[Data]] = []
        for child in element.children:
            if isinstance(child, Element) and child.name == "li":
                entry: list[Data] = []
                self._children(child, entry, offset, centre=False)
                if entry:
                    entries.append(entry)
        if entries:
            ordered = element.name == "ol"
            start = element.attrs.get("start", "1")
            first = int(start) if ordered and start.isdigit() else 1
            data = {"kind": "list", "ordered": ordered, "start": first, "items": entries}
            out.append({**data, "tight": True})

    def _table(self, element: Element, out: list[Data], offset: int) -> None:
        """A table's rows (in <thead>, <tbody> or right under it), each cell as blocks."""
        head: list[list[Data]] = []
        rows: list[list[list[Data]]] = []
        for row, in_head in _rows(element, in_head=False):
            cells: list[list[Data]] = []
            for cell in row.children:
                if isinstance(cell, Element) and cell.name in ("td", "th"):
                    blocks: list[Data] = []
                    self._children(cell, blocks, offset, centre=False)
                    cells.append(blocks)
            header = in_head or all(c.name == "th" for c in row.children if isinstance(c, Element))
            if header and not head and not rows and cells:
                head = cells
            elif cells:
                rows.append(cells)
        if head or rows:
            out.append({"kind": "table", "head": head, "rows": rows})
        for child in element.children:
            if isinstance(child, Element) and child.name == "caption":
                self._block(child, out, offset, centre=False)

    def _media(self, element: Element, out: list[Data], line: int) -> None:
        """A player as a link to what it plays, on its poster where it has one."""
        link = self._media_link(element, line)
        if link is None:
            return
        poster = element.attrs.get("poster", "")
        if poster:
            label = link["spans"][0]["text"]
            source = self.spans.picture(poster, f"<{element.name} poster>", line)
            if source is not None:
                out.append({"kind": "image", "src": source, "alt": label, "href": link["url"]})
        out.append({"kind": "paragraph", "spans": [link]})

    def _media_link(self, element: Element, line: int) -> Data | None:
        attrs = dict(element.attrs)
        if not attrs.get("src"):
            sources = [c for c in element.children if isinstance(c, Element) and c.name == "source"]
            attrs["src"] = sources[0].attrs.get("src", "") if sources else ""
        link = self.spans.media_link(element.name, attrs, line)
        if link is None:
            self.spans.left_out(element.shown, "a player without a source", line)
        return link


_BLOCKISH = _CONTAINERS | names(
    "summary blockquote ul ol li pre hr table tr td th video audio iframe embed"
)


def _rows(element: Element, *, in_head: bool) -> list[tuple[Element, bool]]:
    found: list[tuple[Element, bool]] = []
    for child in element.children:
        if not isinstance(child, Element):
            continue
        if child.name == "tr":
            found.append((child, in_head))
        elif child.name in ("thead", "tbody", "tfoot"):
            found += _rows(child, in_head=child.name == "thead")
    return found


def _add_words(run: list[Data], text: str, spans: SpanReader) -> None:
    """HTML text: runs of white space are one space (none between two Chinese characters)."""
    words = text.split()
    if not words:
        if text and run and run[-1].get("kind") != "break":
            spans.add_text(run, " ", False)
        return
    joined = words[0]
    for word in words[1:]:
        joined += word if wide(joined[-1]) and wide(word[0]) else " " + word
    after_break = bool(run) and run[-1].get("kind") == "break"  # a new line starts at its word
    lead = " " if text[:1].isspace() and not after_break else ""
    tail = " " if text[-1:].isspace() else ""
    spans.add_text(run, lead + joined + tail, True)


def _paragraph(spans: list[Data], out: list[Data], centre: bool) -> None:
    kept = trimmed(spans)
    spans.clear()
    if kept and not all(s.get("kind") == "break" for s in kept):
        paragraph: Data = {"kind": "paragraph", "spans": without_breaks(kept)}
        if centre:
            paragraph["align"] = "center"
        out.append(paragraph)


def without_breaks(spans: list[Data]) -> list[Data]:
    """A paragraph's spans without line breaks at either end (an image's <br> once it has
    become a block of its own): none if it held only breaks."""
    while spans and spans[0].get("kind") == "break":
        spans = spans[1:]
    while spans and spans[-1].get("kind") == "break":
        spans = spans[:-1]
    return trimmed(spans)


def describe_image(image: Data, after: Data) -> None:
    """An image without alt text followed by a caption line (a short line of plain words, or
    one in italics, as weeklies write one under an image) takes that line's words as its alt;
    the line stays where it is. A line with a link is the next entry's, not a caption."""
    if image.get("kind") != "image" or image.get("alt") or after.get("kind") != "paragraph":
        return
    spans = after["spans"]
    if len(spans) == 1 and spans[0].get("kind") == "em":
        spans = spans[0]["spans"]
    if any(span.get("kind") not in ("text", "code") for span in spans):
        return
    text = " ".join(_all_words(spans).split())
    if text and len(text) <= _CAPTION_LENGTH:
        image["alt"] = text


def _all_words(spans: list[Data]) -> str:
    return "".join(str(s.get("text", "")) + _all_words(s.get("spans", [])) for s in spans)


_CAPTION_LENGTH = 100  # characters: longer is a paragraph of its own, not a caption
