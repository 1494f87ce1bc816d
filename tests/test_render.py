"""Rendering invariants of issue 14, held by both inliners."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import mjml
import pytest
from pydantic import ValidationError

from newsletter.config.settings import Settings
from newsletter.content import Paragraph, Text, content_text
from newsletter.errors import TemplateError
from newsletter.models import Issue, Item, Link, Placeholder, RenderedEmail, Section
from newsletter.rendering.labels import item_number, section_number
from newsletter.rendering.render import render_issue, site_name


def visible_text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_mjml_is_mjml_python_not_the_slow_port() -> None:
    assert hasattr(mjml, "mjml2html")


def test_every_title_summary_and_url_reaches_both_parts(
    issue: Issue, rendered: RenderedEmail
) -> None:
    page = visible_text(rendered.html)
    hrefs = set(re.findall(r'href="([^"]+)"', rendered.html))
    for n, section in enumerate(issue.sections, start=1):
        assert f"{section_number(n, 'zh')}{section.title}" in page
        assert f"{section_number(n, 'zh')}{section.title}" in rendered.text
        for index, item in enumerate(section.items):
            assert f"{index}、{item.title}" in page
            assert f"{index}、{item.title}" in rendered.text
            assert content_text(item.summary) in page
            assert content_text(item.summary) in rendered.text
            for link in item.links:
                assert html.escape(link.url) in hrefs or link.url in hrefs
                assert f"{link.label}：{link.url}" in rendered.text
                # In the HTML the link names its label and site; the URL is its href.
                anchor = rf'<a [^>]*href="{re.escape(html.escape(link.url))}"[^>]*>([^<]*)</a>'
                texts = re.findall(anchor, rendered.html)
                assert f"{link.label} · {site_name(link.url)}" in texts


def test_titles_link_to_their_first_link(issue: Issue, rendered: RenderedEmail) -> None:
    item = issue.sections[0].items[2]
    assert re.search(
        rf'<a href="{re.escape(item.links[0].url)}"[^>]*>2、{re.escape(str(item.title))}</a>',
        rendered.html,
    )


def test_document_shape(rendered: RenderedEmail) -> None:
    assert rendered.html.lstrip().lower().startswith("<!doctype html>")
    assert '<html lang="zh-CN"' in rendered.html
    assert '<meta name="color-scheme" content="light dark"' in rendered.html
    assert "<mj-" not in rendered.html
    assert "fonts.googleapis.com" not in rendered.html
    assert "PingFang SC" in rendered.html
    assert "@media (prefers-color-scheme:dark)" in rendered.html


def test_responsive_media_rules_keep_important(rendered: RenderedEmail) -> None:
    rules = re.findall(r"@media only screen and \(min-width:480px\)\s*\{([^@]*)\}", rendered.html)
    assert rules, "MJML's desktop column rule is gone"
    assert "width:100% !important" in rules[0].replace(": ", ":")


def test_own_css_is_inlined(rendered: RenderedEmail) -> None:
    assert re.search(r'<h2 style="[^"]*font-size: ?22px', rendered.html)


def test_placeholders_survive_including_inside_href(rendered: RenderedEmail) -> None:
    assert f'href="{Placeholder.UNSUBSCRIBE_URL.value}"' in rendered.html
    assert f'href="{Placeholder.WEB_URL.value}"' in rendered.html
    assert Placeholder.NAME.value in rendered.html
    for placeholder in Placeholder:
        assert placeholder.value in rendered.text


def test_subject_is_the_issue_title(rendered: RenderedEmail) -> None:
    assert rendered.subject == "AI系统内容推荐第14期"
    assert rendered.issue_number == 14


def hostile_issue() -> Issue:
    item = Item(
        title="<b>x</b> & y",
        summary='see <script>alert(1)</script> **bold** [ok](https://e.org/?a=1&b=2) "q" a < b',
        links=[Link(label="<i>", url="https://e.org/?q=<x>&r='1'")],
    )
    return Issue(number=9, title="<title>", sections=[Section(title="a <s> b", items=[item])])


def test_hostile_text_comes_out_escaped(inliner_settings: Settings) -> None:
    rendered = render_issue(hostile_issue(), inliner_settings)
    # Raw HTML is neither carried nor shown as source: its tags go, the words stay; a script's
    # code is not words (issue 30: what cannot be carried goes with a warning).
    assert "<script" not in rendered.html
    assert "&lt;script" not in rendered.html
    assert "alert(1)" not in rendered.html
    assert "<strong>bold</strong>" in rendered.html
    assert "<b>x</b>" not in rendered.html
    assert "<i>" not in rendered.html
    assert "a &lt; b" in rendered.html
    # The text part is not HTML: readers see the characters themselves.
    assert "see bold ok (https://e.org/?a=1&b=2)" in " ".join(rendered.text.split())
    assert "x & y" in rendered.text


def test_an_unsafe_link_target_is_refused_and_a_script_is_left_out() -> None:
    with pytest.raises(ValidationError, match="must be an absolute http://, https:// or mailto:"):
        Item(title="x", summary="[bad](javascript:alert(1))")
    # issue 30: a script block is a warning (the loader reports it at its line), never shown.
    assert Item(title="x", summary="<script>alert(1)</script>\n\nWords.").summary == (
        Paragraph(spans=(Text(text="Words."),)),
    )
    with pytest.raises(ValidationError, match="is only raw HTML, which the email cannot show"):
        Section(title="<s>")


def test_project_templates_win_over_shipped_defaults(settings: Settings, issue: Issue) -> None:
    (settings.templates_dir / "issue.txt").write_text(
        "custom {{ issue.title }}\n", encoding="utf-8"
    )
    assert render_issue(issue, settings).text == "custom AI系统内容推荐第14期\n"


def test_missing_project_templates_fall_back_to_shipped_defaults(
    settings: Settings, issue: Issue
) -> None:
    for path in settings.templates_dir.iterdir():
        path.unlink()
    assert "OneFlow" in render_issue(issue, settings).html


def test_template_error_names_file_and_line(settings: Settings, issue: Issue) -> None:
    path = settings.templates_dir / "issue.txt"
    path.write_text("line one\n{{ issue.title }\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"issue\.txt:2: unexpected '}'"):
        render_issue(issue, settings)
    path.write_text("{{ issue.nope }}\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"issue\.txt:1: .*nope"):
        render_issue(issue, settings)


def test_broken_mjml_is_a_template_error(settings: Settings, issue: Issue) -> None:
    path = settings.templates_dir / "issue.mjml"
    path.write_text("<mjml><mj-body><mj-text>a < b</mj-text></mj-body></mjml>", encoding="utf-8")
    with pytest.raises(TemplateError, match="MJML could not compile") as info:
        render_issue(issue, settings)
    assert "(line 1, column 27 of the generated MJML: " in info.value.message


def test_section_numbers() -> None:
    assert [section_number(n, "zh-CN") for n in (1, 2, 10, 11, 21)] == [
        "一、",
        "二、",
        "十、",
        "十一、",
        "二十一、",
    ]
    assert section_number(3, "en") == "3. "
    assert section_number(3, "zh-CN", "decimal") == "3、"
    assert section_number(3, "zh-CN", "none") == ""


def test_item_numbers_by_style_and_language() -> None:
    # issue 20: an English newsletter never gets 、; decimal counts from 1, as readers do.
    assert [item_number(i, "zh-CN") for i in (0, 1)] == ["0、", "1、"]
    assert [item_number(i, "zh-CN", "decimal") for i in (0, 1)] == ["1、", "2、"]
    assert [item_number(i, "en", style) for i in (0, 1) for style in ("chinese", "decimal")] == [
        "1. ",
        "1. ",
        "2. ",
        "2. ",
    ]
    assert item_number(0, "en", "none") == item_number(0, "zh", "none") == ""


def test_template_folder_is_copied(project: Path) -> None:
    assert (project / "templates" / "email" / "issue.mjml").exists()


def test_aria_label_is_the_title_not_rust_escapes(inliner_settings: Settings) -> None:
    # issue 13.8: MRML wrote Thai สวัสดี as `สว\u{e31}สด\u{e35}` into the body's aria-label.
    title = 'สวัสดี \u200b "quoted" \\u{41} <b> & done'
    item = Item(title="t", links=[Link(label="l", url="https://e.org/")])
    issue = Issue(number=9, title=title, sections=[Section(title="s", items=[item])])
    rendered = render_issue(issue, inliner_settings)
    labels: list[str | None] = []

    class Labels(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if ("aria-roledescription", "email") in attrs:
                labels.append(dict(attrs)["aria-label"])

    Labels().feed(rendered.html)
    assert labels == [title]
    assert "\\u{e31}" not in rendered.html


@pytest.mark.parametrize(
    ("language", "numbering", "section", "item"),
    [
        ("zh-CN", "auto", "一、项目", "0、OneFlow"),
        ("zh-CN", "decimal", "1、项目", "1、OneFlow"),
        # Issue 41: an English issue that numbers nothing gets no numbers unless asked.
        ("en", "auto", "项目", "OneFlow"),
        ("en", "decimal", "1. 项目", "1. OneFlow"),
        ("en", "chinese", "1. 项目", "1. OneFlow"),
        ("en", "none", "项目", "OneFlow"),
    ],
)
def test_numbering_is_the_newsletters(
    settings: Settings, issue: Issue, language: str, numbering: str, section: str, item: str
) -> None:
    # issue 20: an English newsletter numbered its items from 0 with 、.
    chosen = settings.model_copy(
        update={
            "newsletter": settings.newsletter.model_copy(update={"language": language}),
            "render": settings.render.model_copy(update={"numbering": numbering}),
        }
    )
    rendered = render_issue(issue, chosen)
    assert re.search(rf">{re.escape(section)}</h2>", rendered.html)
    assert f">{item}：从零重新设计" in rendered.html
    lines = rendered.text.splitlines()
    assert section in lines
    assert any(line.startswith(f"{item}：从零重新设计") for line in lines)
