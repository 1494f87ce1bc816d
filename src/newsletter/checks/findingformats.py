"""Check findings in -> the text a reader or a CI system takes: text, JSON, GitHub workflow
commands, SARIF 2.1.0.

`newsletter check --format` picks one; `send`'s gate prints the text lines. Every finding is
placed in a file: the issue file's line when the finding is about one (a Markdown fault, an
image without a size), else the issue file itself, so a pull request shows it on that file.
GitHub's workflow commands are escaped as its toolkit does (`%`, CR and LF in the message; also
`:` and `,` in a property), so a message can never end its command early or start another.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from newsletter.checks.lint import Finding
from newsletter.distribution import DISTRIBUTION, installed_version

FORMATS = ("text", "json", "github", "sarif")
Format = Literal["text", "json", "github", "sarif"]
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = f"https://pypi.org/project/{DISTRIBUTION}/"


@dataclass(frozen=True)
class Placed:
    """A finding with the file it is shown at (the issue file's path as given, `/`-separated)
    and its line there, if it has one."""

    finding: Finding
    file: str
    line: int | None

    @property
    def message(self) -> str:
        """The finding's words without the `file:line: ` they start with, when they do: the
        place is given apart in these formats."""
        finding = self.finding
        return finding.message.removeprefix(f"{finding.file}:{finding.line}: ")


def place(findings: Iterable[Finding], issue_file: str) -> list[Placed]:
    """Each finding at its own file and line, or at `issue_file` with no line."""
    return [
        Placed(f, (f.file or issue_file).replace("\\", "/"), f.line if f.file else None)
        for f in findings
    ]


def text_line(finding: Finding) -> str:
    """`error: message [code]`, as `check` and `send` print a finding on a terminal."""
    return str(finding)


def json_document(placed: list[Placed]) -> str:
    """A JSON array, one object per finding: rule, severity, file, line (null: the whole
    file) and message."""
    rows = [
        {
            "rule": p.finding.code,
            "severity": p.finding.level,
            "file": p.file,
            "line": p.line,
            "message": p.message,
        }
        for p in placed
    ]
    return json.dumps(rows, ensure_ascii=False, indent=2)


def github_commands(placed: list[Placed], notices: Iterable[str], issue_file: str) -> list[str]:
    """One workflow command per finding (`::error` or `::warning`, by severity), then a
    `::notice` on the issue file for each note (what the issue file silenced, for one)."""
    lines = []
    for p in placed:
        where = {"file": p.file} | ({"line": str(p.line)} if p.line is not None else {})
        title = f"newsletter check: {p.finding.code}"
        lines.append(_command(p.finding.level, {**where, "title": title}, p.message))
    for note in notices:
        lines.append(_command("notice", {"file": issue_file, "title": "newsletter check"}, note))
    return lines


def _command(name: str, properties: dict[str, str], message: str) -> str:
    shown = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::{name} {shown}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A workflow command's message, as GitHub's toolkit escapes it (`%` first)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message's escapes, and `:` and `,`, which
    would end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def sarif_log(placed: list[Placed]) -> str:
    """A SARIF 2.1.0 log of one run of `newsletter check`: a rule per finding code, a result
    per finding at its file (a URI relative to the repository's root) and line."""
    codes = list(dict.fromkeys(p.finding.code for p in placed))
    rules = [
        {
            "id": code,
            "name": code,
            "shortDescription": {"text": f"newsletter check: {code}"},
            "helpUri": TOOL_URI,
        }
        for code in codes
    ]
    results = []
    for p in placed:
        physical: dict[str, object] = {
            "artifactLocation": {"uri": quote(p.file), "uriBaseId": "%SRCROOT%"}
        }
        if p.line is not None:
            physical["region"] = {"startLine": p.line}
        results.append(
            {
                "ruleId": p.finding.code,
                "ruleIndex": codes.index(p.finding.code),
                "level": p.finding.level,
                "message": {"text": p.message},
                "locations": [{"physicalLocation": physical}],
            }
        )
    driver = {
        "name": "newsletter",
        "version": _version(),
        "informationUri": TOOL_URI,
        "rules": rules,
    }
    run = {"tool": {"driver": driver}, "results": results, "columnKind": "unicodeCodePoints"}
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, ensure_ascii=False, indent=2)


def _version() -> str:
    return installed_version() or "0"  # "0": run from a source tree that was never installed
