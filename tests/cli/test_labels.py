"""The greeting and the numbers around an issue's content, as `newsletter build` writes them
(issue 41): each the editor's choice, by default what the issue does itself."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.weeklies import ENGLISH, add_weekly, weekly_environ

ENGLISH_ISSUE = """---
number: 20
title: Weekly 20
{front}---
{intro}

## Tools

### A fast linter

It lints.

### A formatter

It formats.
"""


def build(project: Path, number: int, environ: dict[str, str]) -> tuple[str, str]:
    """Issue `number` built as a user builds it: its text part, and the sample message's HTML
    part (the reader's name filled in)."""
    result = CliRunner().invoke(
        cli, ["build", "--issue", str(number), "--out", "dist"], env=environ
    )
    assert result.exit_code == 0, result.stderr
    text = (project / "dist" / "email.txt").read_text(encoding="utf-8")
    message = email.message_from_bytes(
        (project / "dist" / "email.eml").read_bytes(), policy=email.policy.default
    )
    html = message.get_body(("html",))
    assert isinstance(html, EmailMessage)
    return text, html.get_content()


def english(project: Path, intro: str, front: str = "", config: str = "") -> dict[str, str]:
    (project / "issues" / "20.md").write_text(
        ENGLISH_ISSUE.format(front=front, intro=intro), encoding="utf-8"
    )
    if config:
        path = project / "newsletter.toml"
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("[newsletter]\n", f"[newsletter]\n{config}\n"), "utf-8")
    return {"NEWSLETTER_NEWSLETTER__LANGUAGE": "en", "NEWSLETTER_NEWSLETTER__SAMPLE_NAME": "Sam"}


def test_an_intro_that_greets_gets_no_second_greeting(project: Path) -> None:
    # The English weekly opens "Hello and welcome to another issue": "Hi Sam Reader," above it
    # greeted its readers twice.
    add_weekly(project, ENGLISH)
    text, _ = build(project, ENGLISH, weekly_environ(ENGLISH))
    assert "Hi Sam Reader," not in text
    assert "Hello and welcome to another issue of The Crab Post!" in text


def test_an_intro_that_does_not_greet_keeps_the_default_greeting(project: Path) -> None:
    environ = english(project, "This week: two tools.")
    text, _ = build(project, 20, environ)
    assert "\nHi Sam,\n\nThis week: two tools.\n" in text
    # "Hiring" opens no greeting: the default stays.
    environ = english(project, "Hiring: we need an editor.")
    text, _ = build(project, 20, environ)
    assert "\nHi Sam,\n\nHiring: we need an editor.\n" in text


@pytest.mark.parametrize(
    ("config", "front", "expected", "absent"),
    [
        ('greeting = ""', "", "\nThis week: two tools.\n", "Hi Sam"),
        ('greeting = "Dear {name},"', "", "\nDear Sam,\n\nThis week: two tools.\n", "Hi Sam"),
        ('greeting = "Dear {name},"', 'greeting: "Hello {name}!"\n', "\nHello Sam!\n", "Dear"),
        ('greeting = "Dear {name},"', 'greeting: ""\n', "\nThis week: two tools.\n", "Dear"),
    ],
)
def test_the_greeting_is_the_editors_in_the_config_or_the_issue(
    project: Path, config: str, front: str, expected: str, absent: str
) -> None:
    environ = english(project, "This week: two tools.", front=front, config=config)
    text, html = build(project, 20, environ)
    assert expected in text
    assert absent not in text
    assert absent not in html
    greeting = expected.strip().split("\n")[0]
    assert ('<p class="nl-greeting"' in html) == (greeting != "This week: two tools.")


def test_a_greeting_of_two_lines_is_a_config_error_at_its_key(project: Path) -> None:
    environ = english(project, "This week.", config='greeting = "Hi\\nthere"')
    result = CliRunner().invoke(cli, ["build", "--issue", "20"], env=environ)
    assert result.exit_code == 1
    assert "greeting" in result.stderr
    assert "must be one line" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_chinese_seed_keeps_its_greeting_and_numbers(project: Path) -> None:
    text, _ = build(project, 14, {})
    assert "\n示例读者，你好！\n" in text
    assert "一、项目" in text
    assert "0、OneFlow：从零重新设计分布式深度学习框架" in text


def test_an_english_issue_without_numbers_gets_none_unless_asked(project: Path) -> None:
    environ = english(project, "This week: two tools.")
    text, _ = build(project, 20, environ)
    assert "\nTools\n" in text
    assert "1. Tools" not in text
    assert "1. A fast linter" not in text
    text, _ = build(project, 20, {**environ, "NEWSLETTER_RENDER__NUMBERING": "decimal"})
    assert "1. Tools" in text
    assert "1. A fast linter" in text
    assert "2. A formatter" in text
    # The issue's own choice wins over the config's.
    (project / "issues" / "20.md").write_text(
        ENGLISH_ISSUE.format(front="numbering: decimal\n", intro="This week."), encoding="utf-8"
    )
    text, _ = build(project, 20, environ)
    assert "1. Tools" in text
