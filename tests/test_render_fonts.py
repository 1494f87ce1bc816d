"""Font stacks follow the language (issue 30, point 6): Latin-first for `[newsletter] language`
en, CJK-first for zh, and per issue where the front matter sets `language:`. A CJK font first
draws an English issue's quotes and apostrophes full-width ("It’ s"), in Outlook above all,
which takes only the first family. Through `newsletter build`, as the editor runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli

LATIN_FIRST = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial,"
CJK_FIRST = "-apple-system, BlinkMacSystemFont, 'PingFang SC', 'Hiragino Sans GB',"
ISSUE = """---
number: 34
title: "It's a weekly"
{language}---
It’s the week’s “news”.

## Links

Text.
"""


def build(project: Path, language: str, front_matter: str) -> tuple[int, str, str]:
    (project / "issues" / "34.md").write_text(ISSUE.format(language=front_matter), "utf-8")
    result = CliRunner().invoke(
        cli,
        ["build", "--issue", "34", "--out", "dist"],
        env={"NEWSLETTER_NEWSLETTER__LANGUAGE": language},
    )
    return result.exit_code, result.stdout, result.stderr


def fonts(project: Path) -> tuple[str, set[str], str]:
    """The HTML part's lang, its font stacks, and Outlook's first family."""
    html = (project / "dist" / "email.html").read_text(encoding="utf-8")
    lang = re.search(r'<html lang="([^"]+)"', html)
    mso = re.search(r"font-family: ('[^']+')[^;]*!important; mso-line-height-rule", html)
    assert lang is not None
    assert mso is not None
    stacks = set(re.findall(r"font-family:\s*(-apple-system[^;\"]*)", html))
    return lang.group(1), stacks, mso.group(1)


@pytest.mark.parametrize(
    ("language", "front_matter", "lang", "stack", "outlook"),
    [
        ("en", "", "en", LATIN_FIRST, "'Segoe UI'"),
        ("zh-CN", "", "zh-CN", CJK_FIRST, "'Microsoft YaHei'"),
        ("zh-CN", "language: en\n", "en", LATIN_FIRST, "'Segoe UI'"),
        ("en", "language: zh-Hans\n", "zh-Hans", CJK_FIRST, "'Microsoft YaHei'"),
    ],
    ids=["en", "zh", "en-issue-of-zh", "zh-issue-of-en"],
)
def test_the_font_stack_follows_the_language(
    project: Path, language: str, front_matter: str, lang: str, stack: str, outlook: str
) -> None:
    code, _, err = build(project, language, front_matter)
    assert code == 0, err
    shown_lang, stacks, first = fonts(project)
    assert shown_lang == lang
    assert len(stacks) == 1
    assert stacks.pop().startswith(stack)
    assert first == outlook


def test_a_language_that_is_no_tag_is_an_error_at_its_line(project: Path) -> None:
    code, out, err = build(project, "en", "language: English please\n")
    assert code == 1
    assert "Traceback" not in out + err
    assert "issues/34.md:4: language: 'English please' is not a language tag" in err
