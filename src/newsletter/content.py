"""The text of an issue as typed values in; what a reader sees of it (HTML, plain text) out.

Blocks (paragraphs, headings, images, quotes, callouts, lists, code, rules) hold spans (text, code,
emphasis, links, line breaks). Both issue formats get here through markup/, so a YAML summary
and a Markdown body are the same values. The templates render the blocks; `inline_html` and
`inline_text` render spans. Every value is checked like any other field: links absolute, images
described, no control characters, no placeholder words.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal

from markupsafe import Markup, escape
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from newsletter.fields import (
    check_image_source,
    check_link_target,
    check_placeholders,
    check_text,
    check_url,
)
from newsletter.markup import parse_content, parse_inline

# A bare URL as link text longer than this is allowed to break anywhere (it would overflow).
_LONG_LINK_TEXT = 32

Url = Annotated[str, AfterValidator(check_url)]
LinkTarget = Annotated[str, AfterValidator(check_link_target)]
ImageSource = Annotated[str, AfterValidator(check_image_source)]
SpanText = Annotated[str, AfterValidator(check_text)]


class Value(BaseModel):
    # Not stripped: the spaces around a bold word are part of the text.
    model_config = ConfigDict(frozen=True, extra="forbid")


class Text(Value):
    kind: Literal["text"] = "text"
    text: SpanText


class Code(Value):
    kind: Literal["code"] = "code"
    text: SpanText


class Strong(Value):
    kind: Literal["strong"] = "strong"
    spans: tuple[Span, ...]


class Emphasis(Value):
    kind: Literal["em"] = "em"
    spans: tuple[Span, ...]


class Strike(Value):
    kind: Literal["strike"] = "strike"
    spans: tuple[Span, ...]


class Anchor(Value):
    """A link in running text (or in a title)."""

    kind: Literal["link"] = "link"
    url: LinkTarget
    spans: tuple[Span, ...]


class Break(Value):
    kind: Literal["break"] = "break"


Span = Annotated[
    Text | Code | Strong | Emphasis | Strike | Anchor | Break, Field(discriminator="kind")
]


def _spans_from_markdown(value: Any) -> Any:
    """A title given as text is read as inline Markdown (bold, code, links)."""
    if isinstance(value, str):
        check_placeholders(value)
        spans, notes = parse_inline(value)
        errors = [n.message for n in notes if n.level == "error"]
        if errors:
            raise ValueError(errors[0])
        if value.strip() and not plain_text_of(spans).strip():
            raise ValueError(
                "is only raw HTML, which the email cannot show: write it as text "
                "(in backticks, `<s>` shows as code)"
            )
        return {"spans": spans}
    if isinstance(value, list | tuple):
        return {"spans": value}
    if not isinstance(value, dict | BaseModel):
        raise ValueError(f"must be text, got {value!r} (put it in quotes)")
    return value


class Inline(Value):
    """One line of rich text: a title. `str()` is its plain text, for subjects and messages."""

    spans: tuple[Span, ...]

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return _spans_from_markdown(value)

    @model_validator(mode="after")
    def _not_blank(self) -> Inline:
        if not self.text.strip():
            raise ValueError("String should have at least 1 character")
        return self

    @property
    def text(self) -> str:
        return plain_text(self.spans)

    @property
    def links(self) -> list[str]:
        return [span.url for span in walk_spans(self.spans) if isinstance(span, Anchor)]

    def __str__(self) -> str:
        return self.text


class Paragraph(Value):
    kind: Literal["paragraph"] = "paragraph"
    spans: Annotated[tuple[Span, ...], Field(min_length=1)]
    # "center": an HTML paragraph the weekly centres (`<p align="center">`).
    align: Literal["", "center"] = ""


class Heading(Value):
    """A heading inside content (below an item's or a section's own)."""

    kind: Literal["heading"] = "heading"
    level: Annotated[int, Field(ge=1, le=6)] = 4
    spans: Annotated[tuple[Span, ...], Field(min_length=1)]


class Image(Value):
    kind: Literal["image"] = "image"
    src: ImageSource
    # Read aloud by screen readers and shown where images are blocked. Empty only as pasted
    # (`![](…)`): the loader warns at its line (or refuses it, [check] alt_text = "error").
    alt: Annotated[str, AfterValidator(check_text)] = ""
    # Its size in pixels, so the layout does not jump while it loads; read from the file for
    # an image under issues/.
    width: Annotated[int, Field(ge=1, le=10_000)] | None = None
    height: Annotated[int, Field(ge=1, le=10_000)] | None = None
    href: LinkTarget | None = None
    caption: SpanText = ""

    @property
    def local(self) -> bool:
        """A file under issues/ (served by `serve`), not a URL."""
        return not self.src.startswith("https://")


class Quote(Value):
    kind: Literal["quote"] = "quote"
    blocks: Annotated[tuple[Block, ...], Field(min_length=1)]


class Callout(Value):
    """A site generator's container or admonition (`::: warning Title`, `!!! note "Title"`):
    its kind as the site names it (note, tip, warning, …), its title, its body."""

    kind: Literal["callout"] = "callout"
    tone: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] = "note"
    title: tuple[Span, ...] = ()
    blocks: Annotated[tuple[Block, ...], Field(min_length=1)]

    @property
    def accent(self) -> str:
        """Its colour's name in the templates: info, tip, warn or danger."""
        return next((name for name, tones in _ACCENTS.items() if self.tone in tones), "info")


# The kinds VuePress, VitePress, Docusaurus and MkDocs name, by the colour their sites give them.
_ACCENTS = {
    "tip": frozenset({"tip", "hint", "success", "check", "done"}),
    "warn": frozenset({"warning", "caution", "attention", "important", "question", "help"}),
    "danger": frozenset({"danger", "error", "failure", "fail", "bug"}),
}


class ListBlock(Value):
    """An ordered or unordered list; an entry may hold one more list, no deeper."""

    kind: Literal["list"] = "list"
    ordered: bool = False
    start: Annotated[int, Field(ge=0)] = 1
    # Tight: entries are lines; loose: entries are paragraphs apart.
    tight: bool = True
    items: Annotated[tuple[tuple[Block, ...], ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _one_level(self) -> ListBlock:
        for entry in self.items:
            for block in entry:
                if isinstance(block, ListBlock) and any(
                    isinstance(inner, ListBlock) for sub in block.items for inner in sub
                ):
                    raise ValueError("lists nest one level in an email; move the third up")
        return self


class CodeBlock(Value):
    kind: Literal["code_block"] = "code_block"
    text: SpanText
    language: str = ""


class Divider(Value):
    kind: Literal["rule"] = "rule"


class Table(Value):
    """A table: its header row (if it has one), then its rows; each cell is blocks."""

    kind: Literal["table"] = "table"
    head: tuple[tuple[Block, ...], ...] = ()
    rows: tuple[tuple[tuple[Block, ...], ...], ...] = ()

    @model_validator(mode="after")
    def _has_cells(self) -> Table:
        if not self.head and not self.rows:
            raise ValueError("a table needs at least one row")
        return self

    def cells(self) -> Iterator[tuple[Block, ...]]:
        yield from self.head
        for row in self.rows:
            yield from row


Block = Annotated[
    Paragraph | Heading | Image | Quote | Callout | ListBlock | CodeBlock | Divider | Table,
    Field(discriminator="kind"),
]


def plain_text_of(spans: list[dict[str, Any]]) -> str:
    """The text of span data, before it is validated."""
    return "".join(
        str(span.get("text", "")) + plain_text_of(span.get("spans", [])) for span in spans
    )


def _blocks_from_markdown(value: Any) -> Any:
    """Content given as text is read as Markdown; what an email cannot carry is refused here
    (the issue loaders report it at its line as a `check` finding instead)."""
    if isinstance(value, str):
        check_placeholders(value)
        parsed = parse_content(value)
        problems = [n.message for n in parsed.notes if n.level == "error"]
        if problems:
            raise ValueError(problems[0])
        return parsed.blocks
    return value


Content = Annotated[tuple[Block, ...], BeforeValidator(_blocks_from_markdown)]

for _model in (Strong, Emphasis, Strike, Anchor, Inline, Quote, Callout, ListBlock, Table):
    _model.model_rebuild()


def walk_spans(spans: Iterable[Any]) -> Iterator[Any]:
    for span in spans:
        yield span
        inner = getattr(span, "spans", None)
        if inner:
            yield from walk_spans(inner)


def walk_blocks(blocks: Iterable[Any]) -> Iterator[Any]:
    """Every block, nested ones included, in reading order."""
    for block in blocks:
        yield block
        if isinstance(block, Quote | Callout):
            yield from walk_blocks(block.blocks)
        elif isinstance(block, ListBlock):
            for entry in block.items:
                yield from walk_blocks(entry)
        elif isinstance(block, Table):
            for cell in block.cells():
                yield from walk_blocks(cell)


def content_links(blocks: Iterable[Any]) -> list[str]:
    """Every link target in `blocks` (running text and linked images), in order."""
    urls: list[str] = []
    for block in walk_blocks(blocks):
        if isinstance(block, Image):
            urls += [block.href] if block.href else []
        spans = block.title if isinstance(block, Callout) else getattr(block, "spans", ())
        for span in walk_spans(spans):
            if isinstance(span, Anchor):
                urls.append(span.url)
    return urls


def content_images(blocks: Iterable[Any]) -> list[Image]:
    return [block for block in walk_blocks(blocks) if isinstance(block, Image)]


def plain_text(spans: Iterable[Any]) -> str:
    """Spans as one line of text: markup gone, links by their text."""
    out = []
    for span in spans:
        if isinstance(span, Text | Code):
            out.append(span.text)
        elif isinstance(span, Break):
            out.append(" ")
        else:
            out.append(plain_text(span.spans))
    return "".join(out)


def content_text(blocks: Iterable[Any]) -> str:
    """The words of `blocks` joined by spaces: for previews and labels, not for readers."""
    words = []
    for block in walk_blocks(blocks):
        if isinstance(block, Paragraph | Heading):
            words.append(plain_text(block.spans))
        elif isinstance(block, Callout) and block.title:
            words.append(plain_text(block.title))
        elif isinstance(block, CodeBlock):
            words.append(block.text)
    return " ".join(words)


_TAGS: dict[type, str] = {Strong: "strong", Emphasis: "em", Strike: "s"}


def inline_html(value: Inline | Iterable[Any]) -> Markup:
    """Spans as HTML, every text escaped: well-formed XML, as MJML requires."""
    spans: Iterable[Any] = value.spans if isinstance(value, Inline) else value
    return Markup("".join(_span_html(span) for span in spans))  # noqa: S704


def _span_html(span: Any) -> str:
    if isinstance(span, Text):
        return str(escape(span.text))
    if isinstance(span, Code):
        return f"<code>{escape(span.text)}</code>"
    if isinstance(span, Break):
        return "<br />"
    inner = "".join(_span_html(child) for child in span.spans)
    if isinstance(span, Anchor):
        # A bare URL as its own text may break anywhere, or it would widen a phone's screen.
        shown = plain_text(span.spans)
        long_url = shown == span.url and len(shown) > _LONG_LINK_TEXT
        style = ' style="word-break:break-all"' if long_url else ""
        return f'<a href="{escape(span.url)}"{style}>{inner}</a>'
    tag = _TAGS[type(span)]
    return f"<{tag}>{inner}</{tag}>"


def inline_text(value: Inline | Iterable[Any]) -> str:
    """Spans as plain text: markup dropped, each link's URL written after its text."""
    spans = list(value.spans if isinstance(value, Inline) else value)
    out = []
    for index, span in enumerate(spans):
        if isinstance(span, Text | Code):
            out.append(span.text)
        elif isinstance(span, Break):
            out.append("\n")
        elif isinstance(span, Anchor):
            shown = inline_text(span.spans)
            target = span.url.removeprefix("mailto:")
            if target != shown:
                out.append(f"{shown} ({target})")
            elif _glued(spans[index + 1 : index + 2]):
                # A mail client would take the "!" or "," after a bare URL into the link.
                out.append(f"<{shown}>")
            else:
                out.append(shown)
        else:
            out.append(inline_text(span.spans))
    return "".join(out)


def _glued(following: list[Any]) -> bool:
    """Text that starts right after a URL, with no space between."""
    if not following or isinstance(following[0], Break):
        return False
    first = plain_text(following)[:1]
    return bool(first) and not first.isspace()
