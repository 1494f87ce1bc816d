"""Markdown text -> content data, directly: what each construct becomes, at which line, and what
is noted instead of being dropped in silence or shown as source."""

from __future__ import annotations

import random
from typing import Any

import pytest

from newsletter.markup import Note, Reader, parse_content, parse_inline, parser


def blocks(text: str) -> list[dict[str, Any]]:
    return parse_content(text).blocks


def notes(text: str) -> list[tuple[str, int, str]]:
    return [(n.level, n.line, n.message) for n in parse_content(text, first_line=10).notes]


def para(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "paragraph", "spans": list(spans)}


def text(value: str) -> dict[str, Any]:
    return {"kind": "text", "text": value}


def test_paragraphs_stay_paragraphs() -> None:
    # issue 20: two lead essays of 14 and 18 paragraphs became one wall each.
    assert blocks("第一段。\n\n第二段。\n\n\n第三段。") == [
        para(text("第一段。")),
        para(text("第二段。")),
        para(text("第三段。")),
    ]


@pytest.mark.parametrize(
    ("source", "joined"),
    [
        ("一个人离鸟儿多远，\n鸟会受惊起飞。", "一个人离鸟儿多远，鸟会受惊起飞。"),
        ("Rust is\na language", "Rust is a language"),
        ("中文\nEnglish", "中文 English"),
        ("안녕하세요\n세계", "안녕하세요 세계"),  # Korean is written with spaces
    ],
)
def test_a_line_break_joins_chinese_without_a_space(source: str, joined: str) -> None:
    # issue 20: a folded summary put a space between two Chinese characters.
    assert blocks(source) == [para(text(joined))]


def test_the_four_marks_and_more_become_spans() -> None:
    [paragraph] = blocks("**粗** *斜* `code` ~~删~~ [论文](https://arxiv.org/abs/1)")
    assert paragraph["spans"] == [
        {"kind": "strong", "spans": [text("粗")]},
        text(" "),
        {"kind": "em", "spans": [text("斜")]},
        text(" "),
        {"kind": "code", "text": "code"},
        text(" "),
        {"kind": "strike", "spans": [text("删")]},
        text(" "),
        {"kind": "link", "url": "https://arxiv.org/abs/1", "spans": [text("论文")]},
    ]


def test_bare_urls_become_links_without_the_sentences_punctuation() -> None:
    [paragraph] = blocks("论文：https://arxiv.org/abs/2110.1；代码（https://e.org/a_(b)）. End")
    links = [s["url"] for s in paragraph["spans"] if s["kind"] == "link"]
    assert links == ["https://arxiv.org/abs/2110.1", "https://e.org/a_(b)"]
    assert paragraph["spans"][-1] == text("）. End")


def test_an_image_is_a_block_of_its_own_with_its_size_and_link() -> None:
    # issue 20: `![](url)` rendered as a stray "!" and an empty link.
    found = blocks(
        "before ![a café](https://e.org/c.png){width=1200 height=800} after\n\n"
        '[![logo](images/logo.png "The logo")](https://e.org)'
    )
    assert found == [
        para(text("before")),
        {
            "kind": "image",
            "src": "https://e.org/c.png",
            "alt": "a café",
            "width": 1200,
            "height": 800,
        },
        para(text("after")),
        {
            "kind": "image",
            "src": "images/logo.png",
            "alt": "logo",
            "caption": "The logo",
            "href": "https://e.org",
        },
    ]


def test_lists_nest_one_level_and_a_third_level_is_shown_flat() -> None:
    parsed = parse_content("- a\n- b\n  1. c\n     - d\n\n1. x\n\n2. y\n", first_line=5)
    outer, ordered = parsed.blocks
    assert outer["kind"] == "list"
    assert outer["tight"]
    assert not outer["ordered"]
    assert outer["items"][0] == [para(text("a"))]
    inner = outer["items"][1][1]
    assert inner["ordered"]
    assert inner["items"] == [[para(text("c")), para(text("d"))]]
    assert ordered["tight"] is False
    assert ordered["start"] == 1
    assert [(n.level, n.line) for n in parsed.notes] == [("warning", 8)]
    assert parsed.lines[(0,)] == 5
    assert parsed.lines[(0, "items", 1, 1)] == 7


def test_quotes_hold_paragraphs_and_lists() -> None:
    # issue 20: a three-paragraph quote, a quote holding a list.
    [quote] = blocks("> 一\n>\n> 二\n>\n> - 2004年：150秒\n> - 2025年：47秒")
    assert quote["kind"] == "quote"
    assert [b["kind"] for b in quote["blocks"]] == ["paragraph", "paragraph", "list"]


def test_code_headings_and_rules() -> None:
    found = blocks(
        "#### Compiler\n\n```rust\nfn main() {\n    a < b\n}\n```\n\n---\n\n    indented"
    )
    assert found == [
        {"kind": "heading", "level": 4, "spans": [text("Compiler")]},
        {"kind": "code_block", "text": "fn main() {\n    a < b\n}", "language": "rust"},
        {"kind": "rule"},
        {"kind": "code_block", "text": "indented", "language": ""},
    ]


def test_html_tables_and_relative_links_are_carried_or_noted_at_their_lines() -> None:
    # issue 30: <kbd>, tables and <div align=center> were notes and lost; now they are carried,
    # and only what cannot be (an unsafe link, a relative one with no base) is a note.
    source = (
        "text <kbd>Ctrl</kbd> here<br>next\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        '<div align="center">raw</div>\n\n'
        "<!-- a comment for the editors -->\n\n"
        "[bad](javascript:alert(1)) and [rel](page.html)\n"
    )
    assert [(level, line) for level, line, _ in notes(source)] == [("error", 20), ("warning", 20)]
    found = blocks(source)
    assert found[0]["spans"] == [
        text("text "),
        {"kind": "code", "text": "Ctrl"},
        text(" here"),
        {"kind": "break"},
        text("next"),
    ]
    assert found[1] == {
        "kind": "table",
        "head": [[para(text("a"))], [para(text("b"))]],
        "rows": [[[para(text("1"))], [para(text("2"))]]],
    }
    assert found[2] == {**para(text("raw")), "align": "center"}
    # The words of a refused link stay, without the link.
    assert found[3] == para(text("bad and rel"))
    assert len(found) == 4


def test_entities_are_read_as_commonmark_reads_them() -> None:
    assert blocks("AT&amp;T &lt;b&gt; &copy;") == [para(text("AT&T <b> ©"))]


def test_titles_are_inline_and_an_image_in_one_is_its_alt_text() -> None:
    spans, found = parse_inline("Announcing `foo` [1.0](https://e.org) ![logo](x.png)")
    assert spans == [
        text("Announcing "),
        {"kind": "code", "text": "foo"},
        text(" "),
        {"kind": "link", "url": "https://e.org", "spans": [text("1.0")]},
        text(" logo"),
    ]
    assert [n.level for n in found] == ["warning"]
    assert parse_inline("# not a heading") == ([text("# not a heading")], [])


def test_text_without_marks_takes_the_short_way_to_the_same_result() -> None:
    # Most summaries have no markup; they skip markdown-it, and must come out the same.
    rng = random.Random(14)
    pieces = [*"ab cd\t#'\":/.-()（）。，、中文", "  ", "&amp;", "x.example", "1."]
    for _ in range(3000):
        source = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        if not source.strip():
            continue
        slow = Reader(1).blocks(parser().parse(source), (), 0, {})
        assert blocks(source) == slow, source


def test_notes_are_values() -> None:
    note = Note("error", "markup", 3, "x")
    assert note == Note("error", "markup", 3, "x")


def test_nesting_past_markdowns_limit_is_an_error_not_a_silent_loss() -> None:
    # markdown-it stops reading at 20 levels and drops what is inside.
    found = notes("> " * 30 + "lost words")
    assert ("error", 10) in [(level, line) for level, line, _ in found]
    assert any("what is inside is lost" in message for _, _, message in found)
    assert not [n for n in notes("> " * 3 + "kept") if n[0] == "error"]


def test_an_img_with_no_picture_file_is_left_out_with_a_note() -> None:
    # A tracking pixel or `src=x` shows nothing: it goes, named, and the words stay.
    found = parse_content('Hi <img src="data:image/gif;base64,R0lG"> <img src=x> there', 10)
    assert found.blocks == [para(text("Hi   there"))]
    assert [(n.level, n.line, n.message[:36]) for n in found.notes] == [
        ("warning", 10, "an image with no picture file <img s"),
        ("warning", 10, "an image with no picture file <img s"),
    ]


def test_a_link_around_a_logo_and_its_name_links_both() -> None:
    # A digest's sponsor table: logo, <br> and name in one <a>; both keep the link.
    source = (
        '<table><thead><tr><th align="center">\n'
        '  <a href="https://s.example.org/">\n'
        '    <img src="https://i.example.org/l.png" width="60px"><br>\n'
        "    <sub>Sponsor</sub><br>\n    <sub>Fast clouds</sub>\n  </a>\n"
        "</th></tr></thead></table>"
    )
    [table] = blocks(source)
    link = {"kind": "link", "url": "https://s.example.org/"}
    assert table["head"] == [
        [
            {"kind": "image", "src": "https://i.example.org/l.png", "alt": "", "width": 60}
            | {"href": "https://s.example.org/"},
            para({**link, "spans": [text("Sponsor"), {"kind": "break"}, text("Fast clouds")]}),
        ]
    ]
