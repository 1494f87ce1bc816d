"""The pre-send lint, directly: each check on a hand-made issue and page."""

from __future__ import annotations

from functools import partial

from newsletter.checks.lint import (
    HTML_WARN,
    Finding,
    check_bidi,
    check_empty_sections,
    check_tracked_host,
    note_findings,
)
from newsletter.checks.lint import run_checks as run_all
from newsletter.config.settings import Settings
from newsletter.markup import Note
from newsletter.models import Issue, Item, Placeholder, RenderedEmail, Section
from newsletter.rendering.clip import GMAIL_CLIP, KB

UNSUBSCRIBE = Placeholder.UNSUBSCRIBE_URL.value
# The checks as a Chinese newsletter runs them (its quotation marks are 「」).
run_checks = partial(run_all, language="zh-CN")


def issue(*urls: str) -> Issue:
    items = [
        {"title": f"条目{i}", "links": [{"label": "链接", "url": u}]} for i, u in enumerate(urls)
    ]
    return Issue.model_validate(
        {
            "number": 1,
            "title": "第1期",
            "sections": [{"title": "项目", "items": items or [{"title": "x"}]}],
        }
    )


def rendered(html: str, text: str = f"退订：{UNSUBSCRIBE}") -> RenderedEmail:
    return RenderedEmail(issue_number=1, subject="第1期", html=html, text=text)


GOOD = f'<html><body><a href="{UNSUBSCRIBE}">退订</a></body></html>'
# The sample recipient's HTML part: the same page with the placeholders filled.
SAMPLE = GOOD.replace(UNSUBSCRIBE, "https://news.example.org/unsubscribe/t")


def codes(findings: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(f.level, f.code) for f in findings]


def test_a_clean_issue_has_no_findings() -> None:
    assert run_checks(issue("https://a.example/1"), rendered(GOOD), (SAMPLE, "text", 10_000)) == []


def test_a_missing_part_is_an_error() -> None:
    assert ("error", "parts") in codes(run_checks(issue(), rendered(GOOD), None))


def test_size_warns_near_and_errors_past_gmails_clip() -> None:
    near = run_checks(issue(), rendered(GOOD), (SAMPLE, "t", HTML_WARN + 1))
    past = run_checks(issue(), rendered(GOOD), (SAMPLE, "t", GMAIL_CLIP + 1))
    assert codes(near) == [("warning", "size")]
    assert codes(past) == [("error", "size")]


def test_links_must_be_absolute_and_http_is_a_warning() -> None:
    findings = run_checks(
        issue("http://a.example/x"),
        rendered(GOOD + '<a href="/relative">x</a>'),
        (SAMPLE, "t", 1),
    )
    assert sorted(codes(findings)) == [("error", "link"), ("warning", "http")]
    # The URL it is about, for a silence that names it.
    assert [f.subject for f in findings if f.code == "http"] == ["http://a.example/x"]


def test_the_same_url_under_two_items_is_a_warning_naming_both() -> None:
    findings = run_checks(
        issue("https://a.example/1", "https://a.example/1"), rendered(GOOD), (SAMPLE, "t", 1)
    )
    assert [str(f) for f in findings] == [
        "warning: https://a.example/1 is linked under 2 items: 「条目0」 and 「条目1」 in 「项目」 "
        "[duplicate-url]"
    ]
    assert findings[0].subject == "https://a.example/1"


def events(language: str) -> list[Finding]:
    """A weekly's events: one meetup's page under each of its events, in two sections."""
    meetup, other = "https://meet.example.org/lisbon", "https://meet.example.org/oslo"

    def event(title: str, url: str) -> dict[str, object]:
        return {"title": title, "links": [{"label": "page", "url": url}]}

    weekly = Issue.model_validate(
        {
            "number": 1,
            "title": "T",
            "sections": [
                {
                    "title": "Virtual",
                    "items": [
                        event("Lisbon", meetup),
                        event("Oslo", other),
                        event("Lisbon", meetup),
                    ],
                },
                {"title": "Europe", "items": [event("Lisbon", meetup), event("Talks", meetup)]},
                {"title": "Jobs", "items": [event("Oslo", other)]},
            ],
        }
    )
    return run_all(weekly, rendered(GOOD), (SAMPLE, "t", 1), language=language)


def test_a_url_repeated_under_many_items_is_one_finding_naming_each_place_once() -> None:
    # issue 24.6: one warning per pair (19 for one weekly) became one per URL.
    assert [str(f) for f in events("en")] == [
        "warning: https://meet.example.org/lisbon is linked under 4 items: “Lisbon” (2 times) "
        "in “Virtual”; “Lisbon” and “Talks” in “Europe” [duplicate-url]",
        "warning: https://meet.example.org/oslo is linked under 2 items: “Oslo” in “Virtual”; "
        "“Oslo” in “Jobs” [duplicate-url]",
    ]


def test_the_newsletters_words_are_quoted_in_its_language() -> None:
    assert "「Lisbon」 (2 times) in 「Virtual」" in events("zh-CN")[0].message
    assert "“Lisbon” (2 times) in “Virtual”" in events("en")[0].message
    # A language without marks of its own gets English ones, as it gets English words.
    assert "“Lisbon” (2 times) in “Virtual”" in events("de")[0].message


def test_images_need_alt_text_and_styles_have_a_budget() -> None:
    page = GOOD + '<img src="a.png"><style>' + "a{}" * 6000 + "</style>"
    assert sorted(
        codes(run_checks(issue(), rendered(page), (page.replace(UNSUBSCRIBE, "u"), "t", 1)))
    ) == [
        ("error", "style-size"),
        ("warning", "alt"),
    ]


def test_unsubscribe_must_be_visible_in_html_and_present_in_text() -> None:
    hidden = f'<a href="{UNSUBSCRIBE}"> </a>'
    findings = run_checks(issue(), rendered(hidden, text="no link"), ("", "t", 1))
    assert codes(findings) == [("error", "unsubscribe"), ("error", "unsubscribe")]


def test_a_bidi_override_in_a_title_is_flagged_with_its_code_point() -> None:
    # issue 13.10: RTL override characters in titles passed unflagged.
    items = [Item(title="gnp.\u202eexe"), Item(title="שלום עולם")]
    issue = Issue(number=1, title="T", sections=[Section(title="a\u2067b\u2069", items=items)])
    assert [str(f) for f in check_bidi(issue, "zh-CN")] == [
        "warning: the title 「a<U+2067>b<U+2069>」 contains a bidirectional control, "
        "which shows the text in another order than it is written [bidi]",
        "warning: the title 「gnp.<U+202E>exe」 contains a bidirectional control, "
        "which shows the text in another order than it is written [bidi]",
    ]


def test_the_issue_files_notes_are_findings_at_their_lines() -> None:
    notes = [
        Note("error", "markup", 12, "a table cannot be laid out"),
        Note("warning", "x", 3, "y"),
    ]
    findings = run_checks(
        issue(), rendered(GOOD), (SAMPLE, "t", 1), note_findings(notes, "issues/1.md")
    )
    assert [str(f) for f in findings] == [
        "error: issues/1.md:12: a table cannot be laid out [markup]",
        "warning: issues/1.md:3: y [x]",
    ]


def test_a_section_with_nothing_in_it_is_a_warning() -> None:
    quiet = Issue(
        number=1, title="T", sections=[Section(title="空栏目"), Section(title="s", intro="x")]
    )
    assert [str(f) for f in check_empty_sections(quiet, "zh-CN")] == [
        "warning: the section 1 「空栏目」 has no text and no items [empty-section]"
    ]


def test_empty_sections_are_one_finding() -> None:
    full = Section(title="Full", intro="x")
    some = Issue(
        number=1,
        title="T",
        sections=[Section(title=f"S{n}") for n in range(1, 8)] + [full],
    )
    assert [str(f) for f in check_empty_sections(some, "en")] == [
        "warning: 7 sections have no text and no items: 1 “S1”, 2 “S2”, 3 “S3”, 4 “S4”, "
        "5 “S5” and 2 more [empty-section]"
    ]
    # A fresh issue from `newsletter new`: its sections' titles and nothing else.
    fresh = Issue(number=2, title="T", sections=[Section(title="A"), Section(title="B")])
    assert [str(f) for f in check_empty_sections(fresh, "en")] == [
        "warning: all 2 sections are still empty (1 “A”, 2 “B”): the issue has no text yet "
        "[empty-section]"
    ]


def test_links_in_titles_summaries_and_intros_are_checked() -> None:
    text = Issue.model_validate(
        {
            "number": 1,
            "title": "T",
            "intro": "see [a](http://a.example/intro)",
            "sections": [
                {
                    "title": "[S](http://a.example/section)",
                    "items": [{"title": "x", "summary": "![pic](https://a.example/p.png)"}],
                }
            ],
        }
    )
    findings = run_checks(text, rendered(GOOD), (SAMPLE, "t", 1))
    assert sorted(f.message for f in findings if f.code == "http") == [
        "link http://a.example/intro is http, not https",
        "link http://a.example/section is http, not https",
    ]


def test_near_the_clip_the_costly_sections_are_named() -> None:
    big = rendered(GOOD).model_copy(
        update={"section_sizes": (50 * KB, 30 * KB), "whole_size": 95 * KB}
    )
    two = Issue(number=1, title="T", sections=[Section(title="大"), Section(title="小")])
    findings = run_checks(two, big, (SAMPLE, "t", 95 * KB))
    assert ("warning", "section-size") in codes(findings)
    [costly] = [f for f in findings if f.code == "section-size"]
    assert costly.message == (
        "the sections that cost the most (of 95.0 KB): 1 大 50.0 KB, 2 小 30.0 KB"
    )
    # Far from it, nothing is said.
    small = rendered(GOOD).model_copy(update={"section_sizes": (5 * KB,), "whole_size": 9 * KB})
    assert [
        f for f in run_checks(two, small, (SAMPLE, "t", 9 * KB)) if f.code == "section-size"
    ] == []


def test_tracked_links_outside_the_senders_domain_are_a_warning(settings: Settings) -> None:
    def with_(base_url: str, clicks: str = "per-reader", sender: str = "") -> Settings:
        newsletter = settings.newsletter.model_copy(
            update={"base_url": base_url, "sender": sender or settings.newsletter.sender}
        )
        tracking = settings.tracking.model_copy(update={"clicks": clicks})
        return settings.model_copy(update={"newsletter": newsletter, "tracking": tracking})

    (finding,) = check_tracked_host(with_("https://clicks.tracker.example.net"))
    assert finding.level == "warning"
    assert finding.code == "tracked-host"
    assert "clicks.tracker.example.net, outside the sender's domain example.org" in finding.message
    assert check_tracked_host(with_("https://news.example.org")) == []
    assert check_tracked_host(with_("https://links.example.org")) == []  # the same organization
    assert (
        check_tracked_host(with_("https://x.example.co.uk", sender="a <a@news.example.co.uk>"))
        == []
    )
    assert check_tracked_host(with_("https://example.co.uk", sender="a <a@other.co.uk>"))
    assert check_tracked_host(with_("https://clicks.tracker.example.net", clicks="off")) == []
