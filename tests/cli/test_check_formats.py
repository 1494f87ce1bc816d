"""`newsletter check --format text|json|github|sarif` (issue 33, point 3): the same findings
for a terminal, a program, GitHub's pull-request annotations and code scanning, each at the
issue file's real line, with GitHub's escapes, and the exit codes of the text format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from newsletter.checks.findingformats import escape_data, escape_property
from newsletter.cli.main import cli

# Each line is the issue file's, so a test can name the line a finding must point at.
ISSUE = """\
---
number: 2
title: "Formats 2"
date: 2026-12-01
preheader: "Checks for CI."
---
An introduction.

## Reading

### [A plain item](https://example.org/plain)

Its text.

### [Mirror](ftp://files.example.org/a)

A <Support /> claim.

### [Odd markup](https://example.org/odd)

See [it](./5%,y:z.md) here.
"""
FTP_LINE = 15  # the ftp:// link: an error
BOLD_LINE = 17  # an MDX component: a warning
ODD_LINE = 21  # a relative link whose shown target has %, `,` and `:`

# SARIF 2.1.0's required structure, written from the standard (sections 3.13-3.30): no package
# that installs here ships the OASIS schema file, so the fields code scanning reads are held to
# the standard's types and required members by hand.
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "version": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {"id": {"type": "string"}},
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {
                                    "type": "object",
                                    "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
                                    "properties": {"text": {"type": "string"}},
                                },
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                        "properties": {
                                                            "uri": {
                                                                "type": "string",
                                                                "format": "uri-reference",
                                                            },
                                                            "uriBaseId": {"type": "string"},
                                                        },
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {
                                                            "startLine": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            }
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.fixture
def initialized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project made by `newsletter init`, the working directory, with issues/2.md above."""
    root = tmp_path / "letter"
    done = CliRunner().invoke(cli, ["init", str(root), "--yes"])
    assert done.exit_code == 0, done.output
    monkeypatch.chdir(root)
    monkeypatch.delenv("NEWSLETTER_SECRET", raising=False)
    (root / "issues" / "2.md").write_text(ISSUE, encoding="utf-8")
    lines = ISSUE.splitlines()
    assert "ftp://" in lines[FTP_LINE - 1]
    assert "<Support />" in lines[BOLD_LINE - 1]
    assert "./5%,y:z.md" in lines[ODD_LINE - 1]
    return root


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", "--issue", "2", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_github_format_annotates_the_issue_files_lines_escaped_as_github_says(
    initialized: Path,
) -> None:
    code, out, _ = check("--format", "github")
    assert code == 1  # the ftp:// link is an error, as in the text format
    commands = [line for line in out.splitlines() if line.startswith("::")]
    assert commands == [
        f"::error file=issues/2.md,line={FTP_LINE},title=newsletter check%3A link::the link to"
        " 'ftp://files.example.org/a' must be an absolute http://, https:// or mailto: address;"
        " its text is shown without the link",
        f"::warning file=issues/2.md,line={BOLD_LINE},title=newsletter check%3A markup::an MDX"
        " component <Support /> is left out of the email (the text around it stays); the site"
        " draws it, an email cannot: write what readers need of it in Markdown",
        # `%` is %25 in the message (the link's own %25 becomes %2525); `,` and `:` stay (they are
        # only escaped in properties, as the title's `:` is).
        f"::warning file=issues/2.md,line={ODD_LINE},title=newsletter check%3A link::the link to"
        " './5%2525,y:z.md' is relative, and an email has no page to resolve it from: its text is"
        " shown without the link; add the page's address to the front matter (base:"
        " https://example.org/weekly/42/) or write the link whole",
    ]
    # The summary stays in the log, after the annotations.
    assert out.splitlines()[-1] == "issue 2: 1 error(s), 2 warning(s)"


@pytest.mark.slow
def test_the_text_format_is_the_default_and_unchanged(initialized: Path) -> None:
    code, out, _ = check()
    assert code == 1
    assert (code, out) == check("--format", "text")[:2]
    assert "::" not in out
    assert out.splitlines()[0] == (
        f"error: issues/2.md:{FTP_LINE}: the link to 'ftp://files.example.org/a' must be an"
        " absolute http://, https:// or mailto: address; its text is shown without the link [link]"
    )


@pytest.mark.slow
def test_json_format_is_one_object_per_finding_on_stdout_alone(initialized: Path) -> None:
    code, out, err = check("--format", "json")
    assert code == 1
    findings = json.loads(out)
    assert [(f["rule"], f["severity"], f["file"], f["line"]) for f in findings] == [
        ("link", "error", "issues/2.md", FTP_LINE),
        ("markup", "warning", "issues/2.md", BOLD_LINE),
        ("link", "warning", "issues/2.md", ODD_LINE),
    ]
    assert findings[2]["message"].startswith("the link to './5%25,y:z.md' is relative")
    assert "issue 2: 1 error(s), 2 warning(s)" in err


@pytest.mark.slow
def test_a_finding_about_no_line_is_on_the_issue_file(initialized: Path) -> None:
    path = initialized / "issues" / "2.md"
    text = ISSUE.replace("ftp://files.example.org/a", "http://files.example.org/a")
    path.write_text(text.replace("<Support />", "bold").replace("[it](./5%,y:z.md)", "it"))
    code, out, _ = check("--format", "github")
    assert code == 0  # warnings only: exit 0, as in the text format
    assert (
        "::warning file=issues/2.md,title=newsletter check%3A http::link"
        " http://files.example.org/a is http, not https"
    ) in out.splitlines()
    code, out, _ = check("--format", "json")
    assert json.loads(out) == [
        {
            "rule": "http",
            "severity": "warning",
            "file": "issues/2.md",
            "line": None,
            "message": "link http://files.example.org/a is http, not https",
        }
    ]


@pytest.mark.slow
def test_what_the_issue_file_silences_is_a_notice(initialized: Path) -> None:
    path = initialized / "issues" / "2.md"
    text = ISSUE.replace("ftp://files.example.org/a", "http://files.example.org/a")
    path.write_text(text.replace("date: ", "silence: [http]\ndate: ", 1), encoding="utf-8")
    code, out, _ = check("--format", "github")
    assert code == 0
    assert (
        "::notice file=issues/2.md,title=newsletter check::silenced by the issue file: http (1)"
    ) in out.splitlines()
    assert "%3A http::" not in out


@pytest.mark.slow
def test_sarif_format_is_a_valid_sarif_log_at_the_real_lines(initialized: Path) -> None:
    code, out, err = check("--format", "sarif")
    assert code == 1
    log: dict[str, Any] = json.loads(out)
    jsonschema.validate(log, SARIF_REQUIRED, format_checker=jsonschema.FormatChecker())
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "newsletter"
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    placed = [
        (
            rules[r["ruleIndex"]],
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in run["results"]
    ]
    assert placed == [
        ("link", "link", "error", "issues/2.md", FTP_LINE),
        ("markup", "markup", "warning", "issues/2.md", BOLD_LINE),
        ("link", "link", "warning", "issues/2.md", ODD_LINE),
    ]
    assert "issue 2: 1 error(s), 2 warning(s)" in err


def test_an_issue_file_that_does_not_load_is_annotated_at_its_line(initialized: Path) -> None:
    path = initialized / "issues" / "2.md"
    path.write_text(ISSUE.replace("date: 2026-12-01", "date: 2026-02-30"), encoding="utf-8")
    code, out, err = check("--format", "github")
    assert code == 1
    assert out.startswith("::error file=issues/2.md,line=4,title=newsletter check%3A issue-file::")
    assert "error: issues/2.md:4: date:" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_property_with_a_comma_or_colon_is_escaped(initialized: Path) -> None:
    # The issue folder is the project's choice ([paths] issues): its name goes into `file=`.
    config = initialized / "newsletter.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + '\n[paths]\nissues = "drafts,2026:dec"\n',
        encoding="utf-8",
    )
    folder = initialized / "drafts,2026:dec"
    folder.mkdir()
    (initialized / "issues" / "2.md").rename(folder / "2.md")
    code, out, _ = check("--format", "github")
    assert code == 1
    assert out.startswith(
        f"::error file=drafts%2C2026%3Adec/2.md,line={FTP_LINE},title=newsletter check%3A link::"
    )
    code, out, _ = check("--format", "sarif")
    result = json.loads(out)["runs"][0]["results"][0]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "drafts%2C2026%3Adec/2.md"


def test_a_line_break_in_a_message_is_escaped_as_github_says() -> None:
    # No finding of today's checks carries a line break, but a message is the editor's text:
    # a raw break would end the workflow command and start a line the runner reads as a log.
    assert escape_data("5%,\r\ny:z") == "5%25,%0D%0Ay:z"
    assert escape_property("5%,\r\ny:z") == "5%25%2C%0D%0Ay%3Az"
