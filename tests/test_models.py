"""The issue models accept good data and refuse bad data with a reason."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from newsletter.models import Issue, Item, Link, Section


def test_good_issue() -> None:
    issue = Issue.model_validate(
        {
            "number": 3,
            "title": "  Issue 3  ",
            "date": "2021-11-01",
            "sections": [{"title": "S", "items": [{"title": "T", "links": []}]}],
        }
    )
    assert issue.title == "Issue 3"
    assert issue.date is not None
    assert issue.date.isoformat() == "2021-11-01"
    assert issue.sections[0].items[0].url is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("github.com/x", "must be an absolute http:// or https:// URL"),
        ("javascript:alert(1)", "must be an absolute http:// or https:// URL"),
        ("ftp://example.org/x", "must be an absolute http:// or https:// URL"),
        ("https:///path-only", "has no host name"),
        ("https://example.org/a b", "must not contain spaces or control characters"),
        ("https://example.org/\x00", "must not contain spaces or control characters"),
    ],
)
def test_bad_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Link(label="x", url=url)


def test_urls_are_kept_exactly_as_written() -> None:
    url = "https://mp.weixin.qq.com/s/U_muqQOT07eLY2jj_tqSag"
    assert Link(label="链接", url=url).url == url


def test_empty_titles_extra_fields_and_empty_issues_are_refused() -> None:
    with pytest.raises(ValidationError, match="at least 1 character"):
        Item(title="   ")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Item.model_validate({"title": "x", "summery": "typo"})
    with pytest.raises(ValidationError, match="neither a title nor a summary"):
        Item()
    with pytest.raises(ValidationError, match="no sections and no intro"):
        Issue(number=3, title="x")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Issue(number=0, title="x", sections=[Section(title="S", items=[Item(title="t")])])


def test_sections_without_items_and_items_without_titles_are_kept() -> None:
    # issue 20: a call for papers with nothing this week; a quote of the week has no title.
    quiet = Section(title="Call for papers", intro="*Nothing this week.*")
    quotes = Section(title="言论", items=[Item(summary="> 你的首要原则是不要骗自己。\n\n-- 费曼")])
    issue = Issue(number=3, title="x", sections=[quiet, quotes])
    assert issue.sections[0].items == []
    assert issue.sections[1].items[0].title is None


def test_models_are_frozen() -> None:
    link = Link(label="x", url="https://example.org")
    with pytest.raises(ValidationError, match="frozen"):
        link.url = "https://evil.example"  # type: ignore[misc]


def test_a_title_only_item_does_not_repeat_its_link_in_a_row() -> None:
    # issue 20: a title-only item repeated its link in a second row.
    alone = Item(title="Rust 1.84", links=[Link(label="Link", url="https://e.org/a")])
    assert (alone.url, alone.shown_links, alone.compact) == ("https://e.org/a", [], True)
    # A title with a link of its own does not stand for the item's: the row stays.
    own = Item(title="see [docs](https://e.org/d)", links=[Link(label="x", url="https://e.org/b")])
    assert [link.url for link in own.shown_links] == ["https://e.org/b"]
    assert own.own_links == ["https://e.org/b", "https://e.org/d"]
