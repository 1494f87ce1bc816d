"""Every link the email can hold has exactly one place, in the order the email shows it: checked
against the rendered email of issue 14, of the two weeklies and of an issue of every shape."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from newsletter.config.settings import Settings
from newsletter.content import Inline
from newsletter.issues import load_issue_file
from newsletter.models import Issue, Placeholder, RenderedEmail
from newsletter.rendering.clip import kept_part
from newsletter.rendering.places import (
    CANARY,
    IssueLink,
    Part,
    Place,
    Region,
    Spot,
    issue_links,
    item_label,
    link_at,
    outline,
)
from newsletter.rendering.render import render_issue
from support.project import copy_project
from support.weeklies import CHINESE, ENGLISH, add_weekly, weekly_settings

# The reader's own links (unsubscribe, the web version and its anchors): never an issue's place.
READERS_OWN = (Placeholder.UNSUBSCRIBE_URL.value, Placeholder.WEB_URL.value)


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


def email_hrefs(rendered: RenderedEmail) -> list[str]:
    """Every link of the HTML part in document order, but the reader's own."""
    parser = _Anchors()
    parser.feed(rendered.html)
    return [href for href in parser.hrefs if not href.startswith(READERS_OWN)]


def text_holds(rendered: RenderedEmail, url: str) -> bool:
    # The text part writes a mail address without its scheme, as a reader would type it.
    return url in rendered.text or url.removeprefix("mailto:") in rendered.text


def assert_places_are_the_emails_links(issue: Issue, rendered: RenderedEmail) -> list[IssueLink]:
    links = issue_links(issue)
    assert len({link.place for link in links}) == len(links), "a place given twice"
    # A cut email keeps the links of what it kept, at the places they have in the whole issue.
    in_html = links if rendered.cut is None else issue_links(kept_part(issue, rendered.cut))
    assert email_hrefs(rendered) == [link.url for link in in_html]
    for link in links:
        assert text_holds(rendered, link.url), link
        assert link_at(issue, link.place) == link.url
    return links


def test_every_link_of_issue_14_has_one_place(issue: Issue, rendered: RenderedEmail) -> None:
    links = assert_places_are_the_emails_links(issue, rendered)
    assert len(links) > 20
    assert {link.place.region for link in links} == {Region.TITLE, Region.LINKS}


@pytest.mark.parametrize("number", [CHINESE, ENGLISH], ids=["chinese", "english"])
@pytest.mark.slow
def test_every_link_of_the_weeklies_has_one_place(tmp_path: Path, number: int) -> None:
    project = copy_project(tmp_path / "project")
    issue = load_issue_file(add_weekly(project, number))
    rendered = render_issue(issue, weekly_settings(project, number))
    assert rendered.online_from is None
    links = assert_places_are_the_emails_links(issue, rendered)
    assert len(links) >= (200 if number == ENGLISH else 30)
    # Every link the model holds is one of the places, and each place is one of the model's.
    assert {link.url for link in links} == set(issue.links)


@pytest.mark.slow
def test_past_the_clip_the_cut_sections_keep_their_places_in_the_text(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    source = add_weekly(project, ENGLISH).read_text(encoding="utf-8")
    head, body = source.split("\n## Official", 1)
    body = "\n## Official" + body.replace("\n# Quote", "\n## Quote")
    path = project / "issues" / "581.md"
    path.write_text(
        head.replace("number: 580", "number: 581")
        + body
        + body.replace("\n## ", "\n## Again: ")
        + body.replace("\n## ", "\n## Third: "),
        encoding="utf-8",
    )
    issue = load_issue_file(path)
    rendered = render_issue(issue, weekly_settings(project, ENGLISH))
    assert rendered.online_from is not None
    links = assert_places_are_the_emails_links(issue, rendered)
    assert any(link.place.section >= rendered.online_from for link in links)


# Every shape a link can take: a linked cover, a linked image and a link in the intro, a link in
# a section's title and in its text, plain and linked titles, a title-only item (its links row
# hidden), an untitled quote with a links row, linked images in a summary, a section without
# items whose text holds a mail address, and the outro.
SHAPES = {
    "number": 7,
    "title": "Shapes",
    "cover": {
        "src": "https://img.example/cover.png",
        "alt": "A harbour at dawn",
        "width": 1200,
        "height": 600,
        "href": "https://cover.example/",
    },
    "intro": "Start at [the index](https://index.example/).\n\n"
    "[![A map](https://img.example/map.png)](https://map.example/)",
    "sections": [
        {
            "title": "Tools and [crates](https://crates.example/)",
            "intro": "This week [613 pull requests](https://prs.example/) were merged.",
            "items": [
                {
                    "title": "Plain",
                    "links": [
                        {"label": "paper", "url": "https://paper.example/1"},
                        {"label": "code", "url": "https://code.example/1"},
                    ],
                },
                {
                    "title": "Only a title",
                    "links": [{"label": "site", "url": "https://only.example/"}],
                },
                {
                    "title": "Read [the RFC](https://rfc.example/) `now`",
                    "summary": "It is *short*.",
                    "links": [{"label": "rfc", "url": "https://rfc.example/"}],
                },
                {
                    "summary": "> A quote, from [its source](https://source.example/).\n>\n"
                    "> — someone",
                    "links": [{"label": "talk", "url": "https://talk.example/"}],
                },
                {
                    "title": "Pictures",
                    "summary": "[![A chart](https://img.example/chart.png)](https://chart.example/)"
                    "\n\n- one [more](https://more.example/)\n- and a list",
                },
            ],
        },
        {
            "title": "Call for talks",
            "intro": "Nothing this week; [send a talk](mailto:cfp@example.org).",
        },
    ],
    "outro": "Bye, see [the archive](https://archive.example/).",
}


@pytest.fixture
def shapes() -> Issue:
    return Issue.model_validate(SHAPES)


def test_every_shape_of_link_has_one_place_in_the_emails_order(
    shapes: Issue, settings: Settings
) -> None:
    links = assert_places_are_the_emails_links(shapes, render_issue(shapes, settings))
    assert [(link.place, link.url) for link in links] == [
        (Place(Region.INTRO, link=0), "https://cover.example/"),
        (Place(Region.INTRO, link=1), "https://index.example/"),
        (Place(Region.INTRO, link=2), "https://map.example/"),
        (Place(Region.SECTION, 0, link=0), "https://crates.example/"),
        (Place(Region.SECTION, 0, link=1), "https://prs.example/"),
        (Place(Region.TITLE, 0, 0), "https://paper.example/1"),
        (Place(Region.LINKS, 0, 0, 0), "https://paper.example/1"),
        (Place(Region.LINKS, 0, 0, 1), "https://code.example/1"),
        # A title-only item: its one link is the title's, with no row repeating it.
        (Place(Region.TITLE, 0, 1), "https://only.example/"),
        # A title with a link of its own is no link as a whole.
        (Place(Region.TITLE, 0, 2), "https://rfc.example/"),
        (Place(Region.LINKS, 0, 2, 0), "https://rfc.example/"),
        # An untitled item: its URL (the first of its links) is only its links row's.
        (Place(Region.TEXT, 0, 3), "https://source.example/"),
        (Place(Region.LINKS, 0, 3), "https://talk.example/"),
        (Place(Region.TEXT, 0, 4, 0), "https://chart.example/"),
        (Place(Region.TEXT, 0, 4, 1), "https://more.example/"),
        (Place(Region.SECTION, 1), "mailto:cfp@example.org"),
        (Place(Region.OUTRO), "https://archive.example/"),
    ]


def test_an_items_url_beside_a_linked_title_is_the_titles_last_link(
    shapes: Issue, settings: Settings
) -> None:
    """A title with links of its own cannot link as a whole: the text part writes the item's
    URL under it, and that line is the title's last link."""
    data = {
        "number": 8,
        "title": "Beside",
        "sections": [
            {
                "title": "One",
                "items": [
                    {
                        "title": "Mixed [docs](https://docs.example/)",
                        "url": "https://elsewhere.example/",
                        "summary": "Text.",
                    }
                ],
            }
        ],
    }
    issue = Issue.model_validate(data)
    rendered = render_issue(issue, settings)
    links = {link.place: link.url for link in issue_links(issue)}
    assert links == {
        Place(Region.TITLE, 0, 0, 0): "https://docs.example/",
        Place(Region.TITLE, 0, 0, 1): "https://elsewhere.example/",
    }
    assert all(text_holds(rendered, url) for url in links.values())


def test_the_canary_and_unknown_places_name_no_link(issue: Issue) -> None:
    assert link_at(issue, CANARY) is None
    assert CANARY not in {link.place for link in issue_links(issue)}
    assert link_at(issue, Place(Region.LINKS, 0, 0, 99)) is None
    assert link_at(issue, Place(Region.TITLE, 99, 0)) is None


def test_places_sum_to_report_lines(shapes: Issue) -> None:
    assert Place(Region.TITLE, 1, 2).spot == Spot(Part.ITEM, 1, 2)
    assert Place(Region.TEXT, 1, 2, 3).spot == Spot(Part.ITEM, 1, 2)
    assert Place(Region.SECTION, 1, 0, 4).spot == Spot(Part.SECTION, 1)
    assert Place(Region.OUTRO, link=2).spot == Spot(Part.OUTRO)
    assert CANARY.spot is None
    shape = outline(shapes)
    assert {Spot(Part.INTRO), Spot(Part.OUTRO), Spot(Part.SECTION, 0)} <= shape.linked
    assert Spot(Part.SECTION, 1) in shape.linked  # a section of text alone
    assert shape.sections[0][0] == "Tools and crates"  # a title's text, links and all


def test_issue_14s_sections_have_no_own_text(issue: Issue) -> None:
    shape = outline(issue)
    assert not any(spot.part is Part.SECTION for spot in shape.linked)
    assert shape.sections[0][1][0] == str(issue.sections[0].items[0].title)


def test_an_untitled_item_is_named_by_the_start_of_its_text(shapes: Issue) -> None:
    quote = shapes.sections[0].items[3]
    assert quote.title is None
    assert item_label(quote) == "A quote, from its source. — someone"
    assert outline(shapes).sections[0][1][3] == "A quote, from its source. — someone"
    long = quote.model_copy(
        update={"summary": Issue.model_validate({**SHAPES, "intro": "word " * 40}).intro}
    )
    label = item_label(long)
    assert label.endswith("word…")
    assert len(label) <= 60
    chinese = Issue.model_validate({**SHAPES, "intro": "这是一段很长的中文" * 10}).intro
    label = item_label(quote.model_copy(update={"summary": chinese}))
    assert len(label) == 60
    assert label.endswith("…")
    pictured = Issue.model_validate(
        {**SHAPES, "intro": "![A chart of merges](https://img.example/c.png)"}
    )
    assert item_label(quote.model_copy(update={"summary": pictured.intro})) == "A chart of merges"
    titled = quote.model_copy(update={"title": Inline.model_validate("`cargo` 1.84")})
    assert item_label(titled) == "cargo 1.84"
