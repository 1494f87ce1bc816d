"""Every link of the issue becomes a slot in both parts, standing for its place; the reader's own
links, mailto: links and a template's own links are never touched; the canary is added hidden."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from newsletter.config.settings import Settings
from newsletter.issues import load_issue_file
from newsletter.models import Issue, Placeholder, RenderedEmail
from newsletter.rendering.linkslots import SLOT_WORD, add_slots, slot_word
from newsletter.rendering.places import CANARY, Place, Region, issue_links, text_links
from newsletter.rendering.render import render_issue
from support.project import copy_project
from support.weeklies import CHINESE, ENGLISH, add_weekly, weekly_settings
from test_places import SHAPES, email_hrefs

WEB = "https://news.example.org/issues/7/"


def fill(text: str, links: tuple[tuple[Place, str], ...]) -> str:
    """Each slot back to the URL it stands for: the email as it was."""
    return SLOT_WORD.sub(lambda m: links[int(m.group(1))][1], text)


def assert_slotted(issue: Issue, rendered: RenderedEmail) -> tuple[tuple[Place, str], ...]:
    slotted = add_slots(rendered, issue, WEB)
    links = slotted.links
    assert links[-1] == (CANARY, WEB)
    assert len({place for place, _ in links}) == len(links)
    # Each slot is the link the issue has at its place.
    by_place = {link.place: link.url for link in issue_links(issue)}
    assert all(by_place[place] == url for place, url in links[:-1])
    html, text = slotted.rendered.html, slotted.rendered.text
    # The HTML part: every http(s) link of the issue is a slot, in the email's order; the
    # reader's own and mailto: links are as they were.
    hrefs = email_hrefs(slotted.rendered)
    assert hrefs[0] == slot_word(len(links) - 1)  # the canary comes first
    assert [fill(h, links) for h in hrefs[1:]] == email_hrefs(rendered)
    assert all(SLOT_WORD.fullmatch(h) or h.startswith("mailto:") for h in hrefs[1:])
    for own in (Placeholder.UNSUBSCRIBE_URL.value, Placeholder.WEB_URL.value):
        assert html.count(own) == rendered.html.count(own)
        assert text.count(own) == rendered.text.count(own)
    # The text part: the same text once filled, and every link it writes is a slot of the
    # place the text's line stands for.
    assert fill(text, links) == rendered.text
    assert fill(html.replace(_canary(html), ""), links) == rendered.html
    slots_in_text = [links[int(n)] for n in SLOT_WORD.findall(text)]
    expected = [(link.place, link.url) for link in text_links(issue) if link.url.startswith("http")]
    assert slots_in_text == expected
    return links


def _canary(html: str) -> str:
    match = re.search(
        r'<div style="display:none[^>]*><a href="__NL_LINK_\d+__"[^>]*></a></div>', html
    )
    assert match is not None
    return match.group()


def test_issue_14s_links_are_slots_in_both_parts(issue: Issue, rendered: RenderedEmail) -> None:
    links = assert_slotted(issue, rendered)
    assert len(links) > 20


@pytest.mark.parametrize("number", [CHINESE, ENGLISH], ids=["chinese", "english"])
def test_the_weeklies_links_are_slots_in_both_parts(tmp_path: Path, number: int) -> None:
    project = copy_project(tmp_path / "project")
    issue = load_issue_file(add_weekly(project, number))
    links = assert_slotted(issue, render_issue(issue, weekly_settings(project, number)))
    assert len(links) >= (150 if number == ENGLISH else 30)


def test_every_shape_of_link_and_the_hidden_row(settings: Settings) -> None:
    shapes = Issue.model_validate(SHAPES)
    rendered = render_issue(shapes, settings)
    links = assert_slotted(shapes, rendered)
    places = [place for place, _ in links]
    assert Place(Region.SECTION, 1) not in places  # the mailto: link stays as it is
    text = add_slots(rendered, shapes, WEB).rendered.text
    # "Only a title": the HTML shows its title as the link; the text writes its row, the
    # title's place too, so both count for the same line of the report.
    only = places.index(Place(Region.TITLE, 0, 1))
    assert f"site：{slot_word(only)}" in text  # the project writes Chinese
    assert "mailto:cfp@example.org" in rendered.html


def test_a_template_link_the_issue_does_not_have_is_left_alone(
    settings: Settings, issue: Issue
) -> None:
    rendered = render_issue(issue, settings)
    own = '<p><a href="https://sponsor.example/?a=1&amp;b=2">Our sponsor</a></p>'
    html = rendered.html.replace("</body>", own + "</body>")
    text = rendered.text + "\nSponsor: https://sponsor.example/?a=1&b=2 and https://x.example\n"
    slotted = add_slots(rendered.model_copy(update={"html": html, "text": text}), issue, WEB)
    assert own in slotted.rendered.html
    assert "https://sponsor.example/?a=1&b=2 and https://x.example" in slotted.rendered.text


def test_a_url_inside_a_longer_one_is_not_taken_for_it(settings: Settings) -> None:
    data = {
        "number": 8,
        "title": "Prefixes",
        "sections": [
            {
                "title": "One",
                "intro": "See https://a.example/x.html and then [this](https://a.example/x).",
            }
        ],
    }
    issue = Issue.model_validate(data)
    rendered = render_issue(issue, settings)
    slotted = add_slots(rendered, issue, WEB)
    links = slotted.links
    assert [url for _, url in links[:-1]] == ["https://a.example/x.html", "https://a.example/x"]
    assert fill(slotted.rendered.text, links) == rendered.text
    assert "this (__NL_LINK_1__)" in slotted.rendered.text


def test_past_the_clip_the_cut_sections_links_are_slots_in_the_text(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    source = add_weekly(project, ENGLISH).read_text(encoding="utf-8")
    head, body = source.split("\n## Official", 1)
    body = "\n## Official" + body.replace("\n# Quote", "\n## Quote")
    path = project / "issues" / "581.md"
    path.write_text(
        head.replace("number: 580", "number: 581") + body + body.replace("\n## ", "\n## Again: "),
        encoding="utf-8",
    )
    issue = load_issue_file(path)
    rendered = render_issue(issue, weekly_settings(project, ENGLISH))
    assert rendered.online_from is not None
    links = assert_slotted(issue, rendered)
    assert any(place.section >= rendered.online_from for place, _ in links[:-1])
