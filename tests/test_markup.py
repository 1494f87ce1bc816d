"""The summary Markdown subset, directly: what becomes markup, what stays text, what is refused."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from newsletter import markup
from newsletter.markup import to_html, to_text


def test_the_four_marks_become_markup() -> None:
    html = to_html("**粗** *斜* `code` [论文](https://arxiv.org/abs/1)")
    assert html == (
        '<strong>粗</strong> <em>斜</em> <code>code</code> <a href="https://arxiv.org/abs/1">论文</a>'
    )


@pytest.mark.parametrize(
    "text",
    ["<script>alert(1)</script>", "a < b & c", "<b>bold</b>", "# heading", "- list item"],
)
def test_everything_else_stays_literal_and_escaped(text: str) -> None:
    html = to_html(text)
    assert "<script" not in html
    assert "<b>" not in html
    # MJML is XML-strict: the output must parse as the content of an element.
    ET.fromstring(f"<p>{html}</p>")  # noqa: S314 (our own output, not untrusted input)
    assert to_text(text) == text


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "data:text/html,x", "vbscript:x", "https://a.example/\x01"]
)
def test_unsafe_link_targets_are_not_links(url: str) -> None:
    assert "<a " not in to_html(f"[click]({url})")


def test_entities_typed_by_the_editor_stay_as_typed() -> None:
    assert to_html("AT&amp;T") == "AT&amp;amp;T"
    assert to_text("AT&amp;T") == "AT&amp;T"


def test_text_drops_the_marks_and_writes_each_url_after_its_label() -> None:
    text = to_text(
        "见 **[论文](https://arxiv.org/abs/1)** 与 [https://x.example](https://x.example)"
    )
    assert text == "见 论文 (https://arxiv.org/abs/1) 与 https://x.example"


def test_empty_text_is_empty() -> None:
    assert to_html("") == ""
    assert to_text("") == ""


def test_text_without_marks_takes_the_short_way_to_the_same_result() -> None:
    # Most summaries have no markup; they skip markdown-it, and must come out the same.
    rng = random.Random(14)
    pieces = [*"ab cd\n\t#'\"&<>:/.-()（）。，、中文", "  ", "\n\n", "&amp;", "https://x.example"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        assert to_html(text) == markup._html_from_tokens(text), text
        assert to_text(text) == markup._text_from_tokens(text), text
