"""Every link an issue holds has exactly one place, found the same way each time."""

from __future__ import annotations

from newsletter.markup import link_urls
from newsletter.models import Issue
from newsletter.places import (
    CANARY,
    Part,
    Place,
    Region,
    Spot,
    issue_links,
    link_at,
    outline,
)


def with_text(issue: Issue) -> Issue:
    """Issue 14 with links in the intro, the outro and a summary (two in one)."""
    first = issue.sections[0]
    item = first.items[1].model_copy(
        update={"summary": "See [a](https://a.example/1) and [b](https://b.example/2)."}
    )
    section = first.model_copy(update={"items": [first.items[0], item, *first.items[2:]]})
    return issue.model_copy(
        update={
            "intro": "Start at [the index](https://index.example/).",
            "outro": "More [here](https://more.example/) and [there](https://there.example/).",
            "sections": [section, *issue.sections[1:]],
        }
    )


def test_every_link_of_issue_14_has_one_place(issue: Issue) -> None:
    links = issue_links(issue)
    expected = sum(
        (1 if item.url else 0) + len(item.links) + len(link_urls(item.summary))
        for section in issue.sections
        for item in section.items
    )
    assert len(links) == expected > 20
    assert len({link.place for link in links}) == len(links)
    for link in links:
        assert link_at(issue, link.place) == link.url


def test_title_and_list_links_are_told_apart(issue: Issue) -> None:
    item = issue.sections[0].items[0]
    links = {link.place: link for link in issue_links(issue)}
    assert links[Place(Region.TITLE, 0, 0)].url == item.links[0].url
    assert links[Place(Region.LINKS, 0, 0, 0)].url == item.links[0].url
    assert links[Place(Region.LINKS, 0, 0, 1)].label == item.links[1].label


def test_links_in_text_are_numbered_in_document_order(issue: Issue) -> None:
    richer = with_text(issue)
    links = {link.place: link.url for link in issue_links(richer)}
    assert links[Place(Region.INTRO)] == "https://index.example/"
    assert links[Place(Region.TEXT, 0, 1, 0)] == "https://a.example/1"
    assert links[Place(Region.TEXT, 0, 1, 1)] == "https://b.example/2"
    assert links[Place(Region.OUTRO, link=1)] == "https://there.example/"


def test_the_canary_and_unknown_places_name_no_link(issue: Issue) -> None:
    assert link_at(issue, CANARY) is None
    assert CANARY not in {link.place for link in issue_links(issue)}
    assert link_at(issue, Place(Region.LINKS, 0, 0, 99)) is None
    assert link_at(issue, Place(Region.TITLE, 99, 0)) is None


def test_places_sum_to_report_lines(issue: Issue) -> None:
    assert Place(Region.TITLE, 1, 2).spot == Spot(Part.ITEM, 1, 2)
    assert Place(Region.TEXT, 1, 2, 3).spot == Spot(Part.ITEM, 1, 2)
    assert Place(Region.SECTION, 1, 0, 4).spot == Spot(Part.SECTION, 1)
    assert Place(Region.OUTRO, link=2).spot == Spot(Part.OUTRO)
    assert CANARY.spot is None
    shape = outline(with_text(issue))
    assert Spot(Part.INTRO) in shape.linked
    assert Spot(Part.OUTRO) in shape.linked
    assert Spot(Part.SECTION, 0) not in shape.linked  # issue 14's sections have no own text
    assert shape.sections[0][1][0] == issue.sections[0].items[0].title
