"""Raw HTML as the Markdown holds it (one tag in a paragraph, or an HTML block) -> tags and a
small element tree, read by Python's html.parser: never by regular expressions, which cannot
tell an attribute's quoted `>` from the tag's end.

What the tags mean to an email (a style, a link, an image, a block, something left out) is
decided here once, for the span reader and the block reader alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it.token import Token


def names(text: str) -> frozenset[str]:
    """Tag names written as words: `names("b i s")`."""
    return frozenset(text.split())


# Tags whose words are shown as they are, without the tag's own look (an email has none for it).
TRANSPARENT = names(
    "span sub sup small big u mark abbr cite q ins font label time var dfn bdi bdo wbr "
    "nobr tbody thead tfoot colgroup col source track picture"
)
STYLES = {"b": "strong", "strong": "strong", "i": "em", "em": "em"}
STYLES |= {"s": "strike", "del": "strike", "strike": "strike"}
CODES = frozenset({"code", "kbd", "samp", "tt"})
MEDIA = frozenset({"video", "audio", "iframe", "embed"})
# Left out with their content and a warning: nothing an email can run or submit.
DROPPED = names(
    "script style form input button select textarea object noscript template canvas svg "
    "math head meta link base dialog"
)
BLOCKS = names(
    "p div center section article header footer main aside nav figure figcaption details "
    "summary h1 h2 h3 h4 h5 h6 table tr td th caption ul ol li dl dt dd blockquote pre "
    "hr video audio iframe embed"
)
VOID = names("img br hr source track wbr input meta link col embed area param base")


@dataclass(frozen=True)
class Tag:
    """One tag as written: `name` in lower case, `shown` as the editor typed it (`<Support />`)."""

    name: str
    shown: str
    attrs: dict[str, str]
    closing: bool = False

    @property
    def component(self) -> bool:
        """An MDX (JSX) component: its name starts with a capital, as no HTML tag's does."""
        raw = self.shown.lstrip("</")
        return raw[:1].isupper()


@dataclass
class Element:
    """An element of an HTML fragment; `line` counts from 1 within the fragment."""

    name: str
    shown: str
    attrs: dict[str, str]
    line: int
    children: list[Element | str] = field(default_factory=list)

    @property
    def component(self) -> bool:
        return Tag(self.name, self.shown, self.attrs).component

    def text(self) -> str:
        """Every word inside, as one string (a <pre>'s code, a <kbd>'s keys)."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


def _shown(raw: str | None, name: str) -> str:
    """A tag's opening as the editor wrote it, without its attributes: `<img>`, `<Support />`."""
    if not raw:
        return f"<{name}>"
    cut = len(raw)
    for stop in (" ", "\t", "\n", "/", ">"):
        found = raw.find(stop, 1)
        if found != -1:
            cut = min(cut, found)
    return f"{raw[:cut]}{' />' if raw.rstrip().endswith('/>') else '>'}"


def _attrs(pairs: list[tuple[str, str | None]]) -> dict[str, str]:
    return {name: (value or "").strip() for name, value in pairs}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[Tag] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(Tag(tag, _shown(self.get_starttag_text(), tag), _attrs(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(Tag(tag, f"</{tag}>", {}, closing=True))


def read_tag(html: str) -> Tag | None:
    """The one tag of an inline HTML token (`<img src=… />`, `</a>`); None for a comment."""
    reader = _Tags()
    reader.feed(html)
    reader.close()
    return reader.tags[0] if reader.tags else None


def without_dropped(children: Sequence[Token]) -> list[Token]:
    """Inline tokens less what a DROPPED element holds: a script's code or a form's fields are
    not words of the text (the tags stay, so the reader warns of them)."""
    kept: list[Token] = []
    inside = ""
    for token in children:
        tag = read_tag(token.content) if token.type == "html_inline" else None
        if tag is not None and tag.name in DROPPED and tag.name not in VOID:
            if not inside and not tag.closing and not tag.shown.endswith("/>"):
                inside = tag.name
            elif tag.closing and tag.name == inside:
                inside = ""
            kept.append(token)
        elif not inside:
            kept.append(token)
    return kept


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", "", {}, 1)
        self.open: list[Element] = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "p" and self.open[-1].name == "p":
            self.open.pop()  # a <p> closes the paragraph before it, as in a browser
        element = Element(
            tag, _shown(self.get_starttag_text(), tag), _attrs(attrs), self.getpos()[0]
        )
        self.open[-1].children.append(element)
        if tag not in VOID and not (self.get_starttag_text() or "").rstrip().endswith("/>"):
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(
            tag, _shown(self.get_starttag_text(), tag), _attrs(attrs), self.getpos()[0]
        )
        self.open[-1].children.append(element)

    def handle_endtag(self, tag: str) -> None:
        # A closing tag with no opening here (its opening was in another HTML block) is ignored.
        for depth in range(len(self.open) - 1, 0, -1):
            if self.open[depth].name == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        children = self.open[-1].children
        # One text, as written: the parser hands `{{< tweet 1 >}}` over in pieces at its `<`.
        if children and isinstance(children[-1], str):
            children[-1] += data
        else:
            children.append(data)


def read_fragment(html: str) -> Element:
    """An HTML block's elements under a root; tags left open are closed at its end."""
    tree = _Tree()
    tree.feed(html)
    tree.close()
    return tree.root


def size_of(value: str) -> int | None:
    """A width or height attribute in pixels (`800`, `800px`); None for `100%` or nonsense."""
    number = value.strip().removesuffix("px")
    return int(number) if number.isdigit() and 0 < int(number) <= 10_000 else None


def centred(attrs: dict[str, str]) -> bool:
    """`align="center"`, or a style that centres the text."""
    if attrs.get("align", "").lower() == "center":
        return True
    style = attrs.get("style", "").replace(" ", "").lower()
    return "text-align:center" in style


# Containers a weekly opens in one HTML block and closes in a later one, Markdown between. Not
# <p>: the Markdown's own next paragraph closes one left open, as in a browser.
_SPANNING = names("div center section article header footer main aside nav figure details")


def follow_containers(html: str, opened: list[tuple[str, bool]]) -> None:
    """Update `opened` (the containers left open by earlier HTML blocks, each with whether it
    centres) by one HTML block: `<div align="center">` alone pushes one, `</div>` alone pops it,
    and what a block opens and closes itself changes nothing."""
    reader = _Tags()
    reader.feed(html)
    reader.close()
    for tag in reader.tags:
        if tag.name not in _SPANNING or tag.shown.endswith("/>"):
            continue
        if not tag.closing:
            opened.append((tag.name, centred(tag.attrs)))
            continue
        for depth in range(len(opened) - 1, -1, -1):
            if opened[depth][0] == tag.name:
                del opened[depth:]
                break
