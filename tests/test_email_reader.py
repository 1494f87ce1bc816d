"""What readers on other clients get from the rendered issue: the preheader, link text, Outlook's
and iOS's head rules, dark rules for every colour, the date, and the text part's shape.

Rendering only, with both inliners; the same email in a real browser is in
test_accessibility_browser.py.
"""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from newsletter.config.settings import Settings
from newsletter.content import content_text
from newsletter.models import Issue, Item, Link, RenderedEmail, Section
from newsletter.rendering.render import (
    PREHEADER_LIMIT,
    dated,
    long_date,
    preheader_for,
    render_issue,
    site_name,
)

CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def style_blocks(markup: str) -> list[str]:
    return re.findall(r"<style[^>]*>(.*?)</style>", markup, flags=re.DOTALL)


def dark_block(markup: str) -> str:
    [block] = [b for b in style_blocks(markup) if "prefers-color-scheme:dark" in b]
    return block


def test_preheader_is_hidden_without_colour_tricks(issue: Issue, rendered: RenderedEmail) -> None:
    match = re.search(r'<div class="nl-preheader" style="([^"]*)">([^<]*)</div>', rendered.html)
    assert match, "no preheader"
    style = match.group(1).replace(" ", "")
    for rule in ("display:none", "max-height:0", "overflow:hidden", "mso-hide:all"):
        assert rule in style
    assert "color" not in style
    assert "font-size" not in style
    assert html.unescape(match.group(2)) == preheader_for(issue)
    # MJML's own preheader (white 1 px text) is gone.
    assert "color:#ffffff;line-height:1px" not in rendered.html


def test_preheader_is_cut_at_a_title_with_an_ellipsis(issue: Issue) -> None:
    line = preheader_for(issue)
    assert len(line) <= PREHEADER_LIMIT
    assert line.endswith(" · …")
    titles = [str(item.title) for section in issue.sections for item in section.items[:2]]
    shown = line.removesuffix(" · …").split(" · ")
    assert shown == titles[: len(shown)]
    assert 0 < len(shown) < len(titles)


def test_a_short_preheader_has_no_ellipsis_and_an_own_one_wins(issue: Issue) -> None:
    short = Issue(
        number=1,
        title="t",
        sections=[Section(title="s", items=[Item(title="一"), Item(title="二")])],
    )
    assert preheader_for(short) == "一 · 二"
    lone = Issue(number=1, title="t", sections=[Section(title="s", items=[Item(title="长" * 200)])])
    assert preheader_for(lone) == "长" * (PREHEADER_LIMIT - 1) + "…"
    own = issue.model_copy(update={"preheader": "本期：框架与算子"})
    assert preheader_for(own) == "本期：框架与算子"


def link_rows(markup: str) -> list[tuple[str, str]]:
    """(href, text) of every link in the items' link rows."""
    rows = re.findall(r'<p class="nl-links"[^>]*>(.*?)</p>', markup)
    return [
        (html.unescape(href), text)
        for row in rows
        for href, text in re.findall(r'<a href="([^"]+)"[^>]*>([^<]*)</a>', row)
    ]


def test_links_name_their_label_and_site(issue: Issue, rendered: RenderedEmail) -> None:
    anchors = link_rows(rendered.html)
    expected = [
        (link.url, f"{link.label} · {site_name(link.url)}")
        for section in issue.sections
        for item in section.items
        for link in item.links
    ]
    assert anchors == expected
    assert ("https://arxiv.org/pdf/2110.15032.pdf", "论文 · arxiv.org") in expected
    # No raw URL is a link's text, and nothing breaks words anywhere.
    assert not [text for _, text in anchors if "://" in text]
    assert "break-all" not in rendered.html


def test_site_names() -> None:
    assert site_name("https://www.example.org/a?b=1") == "example.org"
    assert site_name("https://mp.weixin.qq.com/s/x") == "mp.weixin.qq.com"
    assert site_name("http://Example.ORG:8080/") == "example.org"


def test_head_has_the_ios_and_outlook_rules(rendered: RenderedEmail) -> None:
    head = rendered.html[: rendered.html.index("</head>")]
    assert '<meta name="x-apple-disable-message-reformatting"' in head
    assert re.search(r'<meta name="format-detection" content="telephone=no, date=no[^"]*"', head)
    blocks = re.findall(r"<!--\[if mso\]>(.*?)<!\[endif\]-->", head, flags=re.DOTALL)
    [mso] = [block for block in blocks if "<style" in block]
    assert "font-family: 'Microsoft YaHei'," in mso
    assert "mso-line-height-rule: exactly" in mso
    assert "&#39;" not in mso  # a style sheet does not decode entities


def test_dark_and_mobile_rules_are_separate_blocks(rendered: RenderedEmail) -> None:
    blocks = style_blocks(rendered.html)
    dark = [b for b in blocks if "prefers-color-scheme" in b]
    mobile = [b for b in blocks if "max-width:480px" in b]
    assert len(dark) == 1
    assert len(mobile) == 1
    assert dark != mobile
    for block in blocks:  # Gmail drops a block with an at-rule nested in another
        assert not re.search(r"@media[^{]*\{[^}]*@", block)


def test_dark_rules_cover_every_class_that_has_a_colour(
    inliner_settings: Settings, rendered: RenderedEmail
) -> None:
    """Each selector inline.css gives a colour, background or border has a dark rule."""
    css = (inliner_settings.templates_dir / "inline.css").read_text(encoding="utf-8")
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)
    coloured = {
        selector.strip()
        for selectors, body in CSS_RULE.findall(css)
        if re.search(r"(^|;|\s)(color|background|border[a-z-]*)\s*:(?!\s*(0|none)\s*(;|$))", body)
        for selector in selectors.split(",")
    }
    dark_selectors = {
        selector.strip()
        for selectors, _ in CSS_RULE.findall(dark_block(rendered.html).split("{", 1)[1])
        for selector in selectors.split(",")
    }
    # Elements styled by tag are reached through the card (or the quote) that holds them.
    covered = {
        "a": ".nl-card a",
        "code": ".nl-card code",
        "pre": ".nl-card pre",
        "blockquote": ".nl-quote blockquote",
    }
    missing = [s for s in sorted(coloured) if covered.get(s, s) not in dark_selectors]
    assert missing == []
    assert "body" in dark_selectors  # no light band below the footer


def test_title_links_look_like_links(rendered: RenderedEmail) -> None:
    assert re.search(r'<h3[^>]*><a href="[^"]+" style="[^"]*#0969da', rendered.html)


def test_the_date_in_both_parts(issue: Issue, settings: Settings) -> None:
    assert issue.date is None  # the seed gives no date: issue 14 shows none until it is sent
    undated = render_issue(issue, settings)
    assert 'class="nl-date"' not in undated.html
    assert "2021年" not in undated.text.splitlines()[1]
    rendered = render_issue(dated(issue, dt.date(2021, 11, 1)), settings)
    assert '<time datetime="2021-11-01">2021年11月1日</time>' in rendered.html
    assert rendered.text.splitlines()[1] == "AI系统内容推荐 · 2021年11月1日"


def test_dated_keeps_the_files_own_date(issue: Issue) -> None:
    own = issue.model_copy(update={"date": dt.date(2021, 11, 1)})
    assert dated(own, dt.date(2026, 1, 2)).date == dt.date(2021, 11, 1)
    assert dated(issue, dt.date(2026, 1, 2)).date == dt.date(2026, 1, 2)
    assert dated(issue, None).date is None


def test_long_dates() -> None:
    day = dt.date(2021, 11, 1)
    assert long_date(day, "{year}年{month}月{day}日") == "2021年11月1日"
    assert long_date(day, "{month_name} {day}, {year}") == "November 1, 2021"


def test_text_part_shape(issue: Issue, rendered: RenderedEmail) -> None:
    text = rendered.text
    # Sections two blank lines apart, items one.
    assert "\n\n\n二、分析\n" in text
    assert "\n\n1、高效并行训练AI大模型" in text
    assert "\n\n\n1、" not in text
    assert "\n\n\n\n" not in text
    # The signature separator is dash, dash, space, on its own line.
    assert "\n-- \n" in text
    footer = text.split("\n-- \n", 1)[1]
    assert "在浏览器中查看：__NL_WEB_URL__" in footer
    assert "退订：__NL_UNSUBSCRIBE_URL__" in footer
    assert ": " not in footer


def test_every_seed_word_and_link_still_reaches_the_reader(
    issue: Issue, rendered: RenderedEmail
) -> None:
    page = html.unescape(re.sub(r"<[^>]+>", "", rendered.html))
    hrefs = {html.unescape(h) for h in re.findall(r'href="([^"]+)"', rendered.html)}
    for section in issue.sections:
        assert str(section.title) in page
        for item in section.items:
            assert str(item.title) in page
            assert content_text(item.summary) in page
            assert {link.url for link in item.links} <= hrefs
            for link in item.links:
                assert f"{link.label}：{link.url}" in rendered.text


def test_english_newsletter_words(issue: Issue, settings: Settings) -> None:
    newsletter = settings.newsletter.model_copy(update={"language": "en"})
    english = settings.model_copy(update={"newsletter": newsletter})
    rendered = render_issue(dated(issue, dt.date(2021, 11, 1)), english)
    assert "November 1, 2021" in rendered.html
    assert re.search(
        r'href="https://arxiv.org/pdf/2110.15032.pdf"[^>]*>论文 · arxiv.org</a>', rendered.html
    )
    assert "View in browser: __NL_WEB_URL__" in rendered.text


@pytest.mark.parametrize(
    "link",
    [Link(label="代码", url="https://example.org/" + "a" * 300)],
)
def test_a_long_url_never_becomes_link_text(settings: Settings, link: Link) -> None:
    item = Item(title="x", summary="y", links=[link])
    issue = Issue(number=2, title="t", sections=[Section(title="s", items=[item])])
    rendered = render_issue(issue, settings)
    assert ">代码 · example.org</a>" in rendered.html
    assert "a" * 300 not in html.unescape(re.sub(r"<[^>]+>", "", rendered.html))
