"""A long issue keeps all it can under Gmail's clip (issue 42, point 4): the cut lands between
sections, items or an item's blocks, never only between sections, and the email ends with the
link to the rest right where it was cut. Code costs its text and a fixed frame.

The issue is tests/support/essay.py: a long Chinese essay whose second section alone is past
the clip, in three shapes (one run of blocks, many items, one long item).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from newsletter.config.settings import load_settings
from newsletter.draft import Draft, review
from newsletter.issues import load_issue_file
from newsletter.rendering import clip
from newsletter.rendering.render import render_issue
from support.essay import CODE_BLOCKS, code, long_essay, paragraph
from support.project import copy_project


def said(n: int) -> str:
    """Paragraph `n` as a reader sees it: its `code` spans without their backticks."""
    return paragraph(n).replace("`", "")


# The blocks of the essay's second section in reading order: (paragraph, code, paragraph) each.
SECOND = [text for n in range(CODE_BLOCKS) for text in (said(100 + n), code(n), said(200 + n))]


def essay_draft(tmp_path: Path, shape: str) -> tuple[Draft, Path]:
    project = copy_project(tmp_path / "project")
    path = project / "issues" / "902.md"
    path.write_text(long_essay(shape=shape), encoding="utf-8")
    settings = load_settings(project / "newsletter.toml", environ={})
    return review(settings, path, "main"), path


def shown(part: str) -> str:
    """The HTML part as a reader's text: tags out, entities decoded."""

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.out: list[str] = []

        def handle_data(self, data: str) -> None:
            self.out.append(data)

    parser = Text()
    parser.feed(part)
    return "".join(parser.out).replace("\r\n", "\n")


def kept_blocks(text: str) -> int:
    """How many of the second section's blocks the email shows, checking they are a prefix."""
    kept = 0
    while kept < len(SECOND) and SECOND[kept] in text:
        kept += 1
    assert not [block for block in SECOND[kept:] if block in text], "a block after the cut"
    return kept


@pytest.mark.parametrize("shape", ["blocks", "items", "item"])
def test_a_long_essay_keeps_all_that_fits_with_the_link_at_the_cut(
    tmp_path: Path, shape: str
) -> None:
    draft, path = essay_draft(tmp_path, shape)
    rendered = draft.rendered
    assert rendered.whole_size > clip.GMAIL_CLIP
    assert rendered.section_sizes[1] > clip.GMAIL_CLIP  # the second section alone
    # The encoded part of the message as sent (its placeholders filled: CUT_AT's room).
    assert clip.wire_size(rendered.html) <= clip.CUT_AT
    assert draft.html_size <= clip.GMAIL_CLIP
    text = shown(draft.html)
    assert "这是一篇长文的开头。" in text
    assert said(0) in text
    assert said(1) in text
    kept = kept_blocks(text)
    assert kept > len(SECOND) // 3  # far more than the title and two lines it used to keep
    # Cut inside the second section: between its blocks, items or one item's blocks.
    assert rendered.online_from == 1
    assert rendered.cut is not None
    section, item, block = rendered.cut
    assert section == 1
    assert {"blocks": item == -1, "items": item > 0, "item": item == 0}[shape]
    if shape == "items":  # whole items, then the blocks of one that fit, under its title
        assert (item, block) == divmod(kept, 3)
        assert f"小节 {item - 1}" in text
        assert (f"小节 {item}" in text) == (block > 0)
        assert f"小节 {item + 1}" not in text
    else:
        assert block == kept
    assert said(2) not in text  # the third section is on the web version
    # The link to the rest comes right where the kept text ends, before the footer.
    end = text.rindex(SECOND[kept - 1]) + len(SECOND[kept - 1])
    notice = text.index("本期较长，邮件里放不下全部内容。")
    assert text[end:notice].strip() == ""
    assert "第二部分：实践" in text[notice:]  # it continues online
    assert notice < text.index("退订")  # the footer, its unsubscribe link, is in
    more = draft.html.index('class="nl-more"')
    assert "#nl-s2" in draft.html[more:]
    # All that fits: one more piece would not.
    issue = load_issue_file(path)
    places = clip.pieces(issue)
    following = places[places.index(rendered.cut) + 1]
    settings = load_settings(path.parents[1] / "newsletter.toml", environ={})
    bigger = render_issue(clip.kept_part(issue, following), settings, whole=True)
    assert clip.wire_size(bigger.html) > clip.CUT_AT - 1500  # the notice's room
    # The text part is whole.
    lines = {line.strip() for line in draft.text.splitlines()}
    for shown_block in [*SECOND, said(2)]:
        assert {line.strip() for line in shown_block.splitlines()} <= lines


def test_check_says_how_far_the_email_goes(tmp_path: Path) -> None:
    draft, _ = essay_draft(tmp_path, "blocks")
    assert draft.rendered.cut is not None
    assert clip.wire_size(draft.rendered.html) <= clip.CUT_AT
    assert 'class="nl-more"' in draft.html
    [finding] = [f for f in draft.findings if f.code == "clip"]
    assert finding.level == "warning"
    blocks = draft.rendered.cut[2]
    assert (
        f"the email keeps section 1 and section 2 in part: {blocks} block(s) of its intro and "
        "ends with a link to the rest on the web version" in finding.message
    )
    assert "(2 section(s): 2 第二部分：实践, 3 第三部分：总结)" in finding.message
    assert not [f for f in draft.findings if f.level == "error"]


class _Pre(HTMLParser):
    """Each <pre> of a part: its tags' own bytes (the frame) and the elements inside it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.frames: list[int] = []
        self.inside: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self._depth += 1
            self.frames.append(len(self.get_starttag_text() or "") + len("</pre>"))
        elif self._depth:
            self.inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._depth -= tag == "pre"


def test_a_code_block_costs_its_text_and_a_small_fixed_frame(tmp_path: Path) -> None:
    """Nothing per line or per token: one <pre>, its text, no element inside it; and an inline
    `code` span costs little more than its text, as a technical essay has hundreds."""
    _, path = essay_draft(tmp_path, "blocks")
    settings = load_settings(path.parents[1] / "newsletter.toml", environ={})
    part = render_issue(load_issue_file(path), settings, whole=True).html
    parser = _Pre()
    parser.feed(part)
    assert len(parser.frames) == CODE_BLOCKS
    assert parser.inside == []
    assert len(set(parser.frames)) == 1
    assert parser.frames[0] <= 240  # it was 350 bytes: a styled <code> inside a styled <pre>
    start = part.index("<code")
    span = part[start : part.index("</code>", start) + len("</code>")]
    assert len(span) - len("useState") <= 115  # it was 164
