"""Loading issue files: good ones become Issues, bad ones name path:line and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from newsletter.content import content_text
from newsletter.errors import IssueError, IssueNotFoundError
from newsletter.issues import list_issue_numbers, load_issue, load_issue_file, read_issue_file
from support.images import gif, jpeg, png, webp

GOOD = """\
number: 7
title: Issue seven
sections:
  - title: Projects
    items:
      - title: First
        summary: Some **bold** text.
        links:
          - {label: Paper, url: "https://example.org/a"}
          - {label: Code, url: "https://example.org/b"}
      - title: Second
        links:
          - label: Link
            url: ftp://example.org/c
"""


def write(tmp_path: Path, text: str, name: str = "7.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def messages(path: Path) -> list[str]:
    with pytest.raises(IssueError) as info:
        load_issue_file(path, display="issues/7.yaml")
    return [str(p) for p in info.value.problems]


def test_bad_url_is_reported_with_its_line_and_field_path(tmp_path: Path) -> None:
    assert messages(write(tmp_path, GOOD)) == [
        "issues/7.yaml:14: sections[0].items[1].links[0].url: "
        "must be an absolute http:// or https:// URL"
    ]


def test_every_problem_is_reported_not_just_the_first(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: First", 'title: ""')
    text = text.replace("summary: Some", "sumary: Some")
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:6: sections[0].items[0].title: String should have at least 1 character",
        "issues/7.yaml:7: sections[0].items[0].sumary: is not a known field (check its spelling)",
    ]


def test_missing_field_points_at_its_parent(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: Issue seven\n", "")
    assert messages(write(tmp_path, text)) == ["issues/7.yaml:1: title: is required"]


def test_yaml_booleans_are_not_silently_text(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: Second", "title: no")
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:11: sections[0].items[1].title: must be text, got False (put it in quotes)"
    ]


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    (problem,) = messages(write(tmp_path, GOOD + "  - title: [unclosed\n"))
    assert problem.startswith("issues/7.yaml:1")
    assert "is not valid YAML" in problem


def test_duplicate_keys_are_reported(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("number: 7\n", "number: 7\nnumber: 7\n")
    assert messages(write(tmp_path, text)) == ["issues/7.yaml:2: number: is given twice"]


def test_file_name_must_match_number(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("number: 7", "number: 8")
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:1: number: is 8 but the file is named 7.yaml; make them match"
    ]


def test_empty_and_non_mapping_and_non_utf8_files(tmp_path: Path) -> None:
    assert messages(write(tmp_path, "")) == ["issues/7.yaml:1: is empty"]
    assert messages(write(tmp_path, "- a\n- b\n")) == [
        "issues/7.yaml:1: must be a mapping with number, title, sections"
    ]
    path = tmp_path / "7.yaml"
    path.write_bytes(b"number: 7\ntitle: \xff\n")
    assert messages(path) == ["issues/7.yaml:2: is not valid UTF-8; save the file as UTF-8"]


def test_control_characters_are_refused(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: Second", 'title: "Sec\\x00ond"')
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:11: sections[0].items[1].title: must not contain control characters"
    ]


def test_missing_issue_lists_the_existing_ones(tmp_path: Path) -> None:
    write(tmp_path, GOOD.replace("ftp://", "https://"))
    write(tmp_path, GOOD.replace("ftp://", "https://").replace("number: 7", "number: 12"), "12.yml")
    assert list_issue_numbers(tmp_path) == [7, 12]
    with pytest.raises(IssueNotFoundError) as info:
        load_issue(tmp_path, 3)
    assert "no such issue (issues: 7, 12)" in str(info.value)


def test_good_file_loads(tmp_path: Path) -> None:
    write(tmp_path, GOOD.replace("ftp://", "https://"))
    issue = load_issue(tmp_path, 7)
    assert issue.sections[0].items[0].url == "https://example.org/a"
    assert issue.sections[0].items[1].links[0].label == "Link"


def test_yaml_alias_bombs_are_refused_quickly(tmp_path: Path) -> None:
    lines = ["number: 7", "title: x", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    lines.append("sections: [{title: s, items: [{title: t, links: *a9}]}]")
    problems = messages(write(tmp_path, "\n".join(lines) + "\n"))
    assert (
        problems[0]
        == "issues/7.yaml:4: a1[0]: repeats another value with a YAML alias; write it out"
    )
    assert problems[-1] == (
        "issues/7.yaml:13: sections[0].items[0].links: "
        "repeats another value with a YAML alias; write it out"
    )


def test_a_title_that_could_inject_a_header_names_its_line(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://")
    text = text.replace("title: Issue seven", 'title: "Hi =?UTF-8?Q?=0A?=Bcc: x@evil.example"')
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:2: title: becomes the Subject header, and it contains a raw `=?...?=` "
        "encoded word, which could inject a mail header"
    ]


@pytest.mark.parametrize(
    ("date", "reason"),
    [("2021-02-30", "day is out of range for month"), ("2021-13-45", "month must be in 1..12")],
)
def test_an_impossible_date_names_its_line(tmp_path: Path, date: str, reason: str) -> None:
    # issue 13.2: a bare ValueError from YAML's timestamp constructor was a traceback.
    text = GOOD.replace("ftp://", "https://").replace(
        "title: Issue seven\n", f"title: T\ndate: {date}\n"
    )
    (message,) = messages(write(tmp_path, text))
    assert message.startswith(f"issues/7.yaml:3: date: {date} is not a real date ({reason})")


def test_a_real_date_still_loads(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace(
        "title: Issue seven\n", "title: T\ndate: 2024-02-29\n"
    )
    assert str(load_issue_file(write(tmp_path, text)).date) == "2024-02-29"


def _from_a_deep_stack(frames: int, path: Path) -> list[str]:
    # A server calls the loader with a stack already ~100 frames deep.
    if frames:
        return _from_a_deep_stack(frames - 1, path)
    return messages(path)


@pytest.mark.parametrize("kind", ["flow", "block"])
def test_nesting_just_under_libyamls_limit_is_refused_not_a_recursion_error(
    tmp_path: Path, kind: str
) -> None:
    # issue 13.3: ~990 levels raised RecursionError in the line index walk.
    depth = 990
    nested = (
        "[" * depth + "]" * depth
        if kind == "flow"
        else "\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth))
    )
    path = write(tmp_path, f"number: 7\ntitle: T\nsections: {nested}\n")
    (message,) = _from_a_deep_stack(150, path)
    assert message.startswith("issues/7.yaml:")
    assert message.endswith("is nested more than 12 levels deep")


def test_a_deeply_nested_key_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "number: 7\n? " + "[" * 990 + "]" * 990 + "\n: x\n")
    assert _from_a_deep_stack(150, path) == [
        "issues/7.yaml:2: has a key that is a list or mapping, not a name"
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("!!int abc", "'abc' cannot be read as YAML !!int"),
        ("!!float x", "'x' cannot be read as YAML !!float"),
        ("!!bool x", "'x' cannot be read as YAML !!bool"),
        ("!!timestamp abc", "abc is not a real date; fix it"),
    ],
)
def test_explicit_tags_that_cannot_be_built_name_their_line(
    tmp_path: Path, value: str, reason: str
) -> None:
    path = write(tmp_path, GOOD.replace("title: Issue seven", f"title: {value}"))
    (message,) = messages(path)
    assert message.startswith(f"issues/7.yaml:2: title: {reason}")


@pytest.mark.parametrize(
    ("find", "replace", "line", "field", "word"),
    [
        # issue 13.4: this link sent every reader's unsubscribe link and name to a third party.
        (
            "https://example.org/a",
            "https://evil.example/track?u=__NL_UNSUBSCRIBE_URL__&n=__NL_NAME__",
            9,
            "sections[0].items[0].links[0].url",
            "__NL_UNSUBSCRIBE_URL__",
        ),
        ("title: Issue seven", "title: Hi __NL_NAME__", 2, "title", "__NL_NAME__"),
        (
            "Some **bold** text.",
            "see [x](https://e.example/?__NL_WEB_URL__)",
            7,
            None,
            "__NL_WEB_URL__",
        ),
        ("label: Paper", "label: __NL_FUTURE__", 9, None, "__NL_FUTURE__"),
    ],
)
def test_placeholder_words_in_issue_content_are_refused_at_their_line(
    tmp_path: Path, find: str, replace: str, line: int, field: str | None, word: str
) -> None:
    text = GOOD.replace("ftp://", "https://").replace(find, replace)
    (message,) = messages(write(tmp_path, text))
    assert message.startswith(f"issues/7.yaml:{line}: {field or ''}")
    assert f"contains {word}: words starting with __NL_ are filled in per reader" in message


def test_a_subject_with_a_bidi_override_or_20000_characters_is_refused(tmp_path: Path) -> None:
    good = GOOD.replace("ftp://", "https://")
    (message,) = messages(write(tmp_path, good.replace("Issue seven", "gnp.\u202eexe")))
    assert message.startswith("issues/7.yaml:2: title: becomes the Subject header")
    assert "bidirectional control U+202E" in message
    (message,) = messages(write(tmp_path, good.replace("Issue seven", "x" * 20_000)))
    assert message.startswith("issues/7.yaml:2: title: becomes the Subject header and is 20,000")
    assert load_issue_file(write(tmp_path, good.replace("Issue seven", "שלום עולם"))).title


# issue 24.3: PyYAML's raw "mapping values are not allowed here" named no value to quote.
@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "title: Rust 1.84: released",
            'title: the value has ": " in it, which YAML reads as another key; '
            'put the whole value in quotes: title: "Rust 1.84: released"',
        ),
        (
            "title: [Rust 1.84](https://e.org) is out",
            "title: the value starts with [, which YAML reads as a list; "
            'put the whole value in quotes: title: "[Rust 1.84](https://e.org) is out"',
        ),
        (
            "title: `cargo` 1.84",
            "title: the value starts with `, which YAML reads as a reserved character; "
            'put the whole value in quotes: title: "`cargo` 1.84"',
        ),
        (
            'title: "Say "hi": now"',
            'title: the value has " inside the " around it, which ends it early; '
            "put it in the other kind of quotes: title: 'Say \"hi\": now'",
        ),
    ],
)
def test_a_value_yaml_misreads_names_the_quotes_to_add(
    tmp_path: Path, line: str, message: str
) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: Issue seven", line)
    assert messages(write(tmp_path, text)) == [f"issues/7.yaml:2: {message}"]


def test_a_broken_list_is_not_text_to_quote(tmp_path: Path) -> None:
    (message,) = messages(write(tmp_path, GOOD.replace("sections:\n", "sections: [\n")))
    assert message.startswith("issues/7.yaml:")
    assert "is not valid YAML" in message
    assert "quotes" not in message


def test_an_indentation_slip_is_named_as_one(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace("title: Issue seven", "  title: x")
    (message,) = messages(write(tmp_path, text))
    assert message == (
        "issues/7.yaml:2: title: is indented differently from the lines around it: keys of one "
        "mapping start in the same column"
    )


def test_the_file_name_mismatch_comes_with_the_other_errors(tmp_path: Path) -> None:
    # issue 24.4: it was reported only once every other error was fixed.
    text = GOOD.replace("number: 7", "number: 8")
    assert messages(write(tmp_path, text)) == [
        "issues/7.yaml:14: sections[0].items[1].links[0].url: "
        "must be an absolute http:// or https:// URL",
        "issues/7.yaml:1: number: is 8 but the file is named 7.yaml; make them match",
    ]
    text = text.replace("sections:", "sections: [\n")
    problems = messages(write(tmp_path, text))
    assert problems[0].startswith("issues/7.yaml:")
    assert "is not valid YAML" in problems[0]


def test_a_folded_summary_keeps_its_paragraphs_and_joins_chinese_lines(tmp_path: Path) -> None:
    # issue 20: `>` put a space between two Chinese characters and lost the paragraph break.
    text = GOOD.replace("ftp://", "https://").replace(
        "summary: Some **bold** text.",
        "summary: >-\n          第一行，\n          第二行。\n\n          Second *paragraph*\n"
        "          on two lines.",
    )
    issue = load_issue_file(write(tmp_path, text))
    first, second = issue.sections[0].items[0].summary
    assert content_text([first]) == "第一行，第二行。"
    assert content_text([second]) == "Second paragraph on two lines."


def test_an_error_inside_a_block_summary_names_its_own_line(tmp_path: Path) -> None:
    text = GOOD.replace("ftp://", "https://").replace(
        "summary: Some **bold** text.",
        "summary: |\n          First.\n\n          ![a chart](../a.png)",
    )
    (message,) = messages(write(tmp_path, text))
    assert message.startswith("issues/7.yaml:10: sections[0].items[0].summary: '../a.png' must")


def test_an_image_without_alt_text_is_a_warning_at_its_line(tmp_path: Path) -> None:
    # issue 30: `![](…)`, in most pasted weeklies, refused the whole issue.
    text = GOOD.replace("ftp://", "https://").replace(
        "summary: Some **bold** text.",
        "summary: |\n          First.\n\n          ![](https://e.org/a.png)",
    )
    notes = read_issue_file(write(tmp_path, text)).notes
    [alt] = [n for n in notes if n.code == "alt"]
    assert (alt.level, alt.line) == ("warning", 10)
    assert alt.message.startswith("an image has no alt text")


MARKDOWN = """\
---
number: 7
date: 2026-08-19
preheader: Crates, events and a quote
---
# Weekly seven

Welcome to issue seven. It has
two lines that join.

## Updates

613 pull requests were [merged](https://e.org/merged).

### [Announcing `foo` 1.0](https://e.org/foo)

The *first* paragraph.

> A quote with a list:
>
> - one
> - two

### A title with [a link](https://e.org/in-title) inside

![A chart of build times](images/chart.png)

## Links

- [First](https://e.org/1)
- [Second](https://e.org/2) with words after it

Closing words after the list.

## Quiet

*Nothing this week.*

## Quotes

###

You are the easiest person to fool.

-- A physicist
"""


def write_markdown(tmp_path: Path, text: str = MARKDOWN, name: str = "7.md") -> Path:
    (tmp_path / "images").mkdir(exist_ok=True)
    (tmp_path / "images" / "chart.png").write_bytes(png(1200, 600))
    return write(tmp_path, text, name)


def test_a_markdown_issue_is_the_same_model(tmp_path: Path) -> None:
    issue = load_issue_file(write_markdown(tmp_path))
    assert issue.title == "Weekly seven"
    assert str(issue.date) == "2026-08-19"
    assert content_text(issue.intro) == "Welcome to issue seven. It has two lines that join."
    updates, links, quiet, quotes = issue.sections
    assert content_text(updates.intro) == "613 pull requests were merged."
    foo, titled = updates.items
    assert foo.url == "https://e.org/foo"
    assert [type(s).__name__ for s in foo.title.spans] == ["Text", "Code", "Text"]  # type: ignore[union-attr]
    assert [b.kind for b in foo.summary] == ["paragraph", "quote"]
    assert titled.url is None
    assert titled.title is not None
    assert titled.title.links == ["https://e.org/in-title"]
    [chart] = titled.summary
    assert (chart.kind, chart.width, chart.height) == ("image", 1200, 600)  # type: ignore[union-attr]
    # A list of links right under a section is a compact list of items.
    first, second, closing = links.items
    assert (str(first.title), first.url, first.compact) == ("First", "https://e.org/1", True)
    assert str(second.title) == "Second with words after it"
    assert closing.title is None
    assert content_text(closing.summary) == "Closing words after the list."
    assert quiet.items == []
    assert content_text(quiet.intro) == "Nothing this week."
    [quote] = quotes.items
    assert quote.title is None
    assert content_text(quote.summary) == "You are the easiest person to fool. -- A physicist"


def test_markdown_errors_name_their_lines(tmp_path: Path) -> None:
    text = MARKDOWN.replace("images/chart.png", "images/missing.png").replace(
        "[First](https://e.org/1)", "[First](http//e.org/1)"
    )
    path = write_markdown(tmp_path, text.replace("number: 7", "number: 8"))
    assert messages(path) == [
        "issues/7.yaml:26: sections[0].items[1].summary: images/missing.png: no such file in "
        f"{tmp_path}",
        "issues/7.yaml:2: number: is 8 but the file is named 7.md; make them match",
    ]


def test_markdown_that_an_email_cannot_carry_is_a_note_at_its_line(tmp_path: Path) -> None:
    text = MARKDOWN.replace(
        "*Nothing this week.*", '*Nothing this week.*\n\n<form action="/x"><input></form>'
    )
    notes = read_issue_file(write_markdown(tmp_path, text)).notes
    assert [(n.level, n.line) for n in notes] == [("warning", 39)]
    assert "HTML <form> is left out of the email" in notes[0].message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda t: t.replace("---\nnumber: 7", "number: 7", 1),
            [
                "issues/7.yaml:1: must start with front matter: a line ---, then number: N and "
                "title: …, then another line ---"
            ],
        ),
        (
            lambda t: t.replace("preheader:", "sections: []\npreheader:"),
            [
                "issues/7.yaml:4: sections: comes from the body's ## headings in a Markdown issue; "
                "remove it"
            ],
        ),
        (
            lambda t: t.replace("## Updates\n", ""),
            [
                f"issues/7.yaml:{line}: an item (###) comes before the first section (##): open "
                "a section first, or make it a #### heading"
                for line in (14, 23)
            ],
        ),
    ],
)
def test_markdown_structure_errors(tmp_path: Path, change: Any, expected: list[str]) -> None:
    assert messages(write_markdown(tmp_path, change(MARKDOWN))) == expected


def test_a_first_heading_under_a_front_matter_title_is_a_section(tmp_path: Path) -> None:
    # issue 30: a pasted weekly heads its first part with `#`; it was "title given twice".
    text = MARKDOWN.replace("---\n# Weekly", "title: Weekly 7\n---\n# Weekly")
    issue = load_issue_file(write_markdown(tmp_path, text))
    assert issue.title == "Weekly 7"
    assert [str(s.title) for s in issue.sections][:2] == ["Weekly seven", "Updates"]
    assert content_text(issue.sections[0].intro).startswith("Welcome to issue seven.")
    same = MARKDOWN.replace("---\n# Weekly seven", "title: Weekly seven\n---\n# Weekly seven")
    assert str(load_issue_file(write_markdown(tmp_path, same)).sections[0].title) == "Updates"


def test_an_issue_with_two_files_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, GOOD.replace("ftp://", "https://"))
    write_markdown(tmp_path)
    assert list_issue_numbers(tmp_path) == [7]
    with pytest.raises(IssueError, match=r"issue 7 has two files, 7\.yaml and 7\.md"):
        load_issue(tmp_path, 7)


@pytest.mark.parametrize("make", [png, gif, jpeg, webp])
def test_an_image_under_issues_gets_its_size_from_the_file(tmp_path: Path, make: Any) -> None:
    suffix = {png: "png", gif: "gif", jpeg: "jpg", webp: "webp"}[make]
    (tmp_path / f"cover.{suffix}").write_bytes(make(1600, 900))
    text = GOOD.replace("ftp://", "https://").replace(
        "sections:", f"cover: {{src: cover.{suffix}, alt: A harbour at dawn}}\nsections:"
    )
    cover = load_issue_file(write(tmp_path, text)).cover
    assert cover is not None
    assert (cover.src, cover.width, cover.height, cover.local) == (
        f"cover.{suffix}",
        1600,
        900,
        True,
    )


def test_an_image_that_is_not_one_or_escapes_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_text("not an image", encoding="utf-8")
    for src, reason in (
        ("fake.png", "fake.png is not a PNG, JPEG, GIF or WebP image"),
        ("../secret.png", "must be an https:// URL or a file under issues/"),
        ("http://e.org/a.png", "must be an https:// URL (mail clients block or warn"),
        ("notes.txt", "must be a PNG, JPEG, GIF or WebP file"),
    ):
        text = GOOD.replace("ftp://", "https://").replace(
            "sections:", f"cover: {{src: '{src}', alt: x}}\nsections:"
        )
        (message,) = messages(write(tmp_path, text))
        assert message.startswith("issues/7.yaml:3: cover")
        assert reason in message


def test_a_misread_value_in_front_matter_names_its_line_in_the_markdown_file(
    tmp_path: Path,
) -> None:
    text = MARKDOWN.replace("preheader: Crates, events and a quote", "title: Crab 7: the quote")
    assert messages(write_markdown(tmp_path, text)) == [
        'issues/7.yaml:4: title: the value has ": " in it, which YAML reads as another key; '
        'put the whole value in quotes: title: "Crab 7: the quote"'
    ]
