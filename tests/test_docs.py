"""README and the CLI in step: every command README names exists, and every command is in README."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from newsletter.cli.main import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
COMMANDS = set(cli.list_commands(click.Context(cli)))


def code_lines() -> list[str]:
    """The lines inside README's fenced code blocks."""
    lines, inside = [], False
    for line in README.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def test_every_command_readme_names_exists() -> None:
    named = set(re.findall(r"`newsletter ([a-z]+)\b", README))
    for line in code_lines():
        named |= set(re.findall(r"^newsletter ([a-z]+)\b", line))
    assert named, "README names no commands"
    assert named <= COMMANDS, f"README names commands that do not exist: {named - COMMANDS}"


def test_every_command_is_documented_in_readme() -> None:
    missing = {name for name in COMMANDS if f"newsletter {name}" not in README}
    assert not missing, f"commands README does not mention: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_readme_gives_a_command_exists(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    for usage in re.findall(rf"newsletter {name}\b([^`\n]*)", README):
        chosen = command
        words = usage.split()
        if isinstance(command, click.Group) and words:  # `newsletter subscribers import ...`
            chosen = command.get_command(click.Context(command), words[0]) or command
        known = {opt for param in chosen.params for opt in getattr(param, "opts", [])}
        known |= {"--help"}
        for option in re.findall(r"(--[a-z][a-z-]*)", usage):
            assert option in known, f"README gives `newsletter {name} {option}`, which it lacks"


def test_the_two_commands_and_the_ci_entry_point() -> None:
    assert "make demo" in README
    assert "make test" in README
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().endswith("make test")


def test_help_lists_every_command() -> None:
    text = cli.get_help(click.Context(cli, info_name="newsletter"))
    for name in COMMANDS:
        assert f"  {name} " in text


def test_readme_links_every_doc_and_each_link_resolves() -> None:
    """The user's manual stays in README; what moved to docs/ is linked from it, and exists."""
    root = Path(__file__).resolve().parents[1]
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README))
    assert {f"docs/{p.name}" for p in (root / "docs").glob("*.md")} <= linked
    assert [link for link in linked if not (root / link).exists()] == []
