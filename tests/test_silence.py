"""An issue file silences warnings it knows about (issue 24.6): every check has a name silence.py
knows, errors are never silenced, the checks that protect readers cannot be named, and a bad
entry is an error at its line in either format."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from newsletter.checks.lint import Finding, Silenced, silence_findings
from newsletter.errors import IssueError
from newsletter.issues import read_issue_file
from newsletter.silence import CHECKS, Silence, read_silence, silenceable

SRC = Path(__file__).resolve().parents[1] / "src" / "newsletter"
# Where each kind of finding takes its check's name: the position of the argument.
_CODE_ARGUMENT = {"Finding": 1, "Note": 1, "note": 1, "Fault": 0}


def emitted_codes() -> set[str]:
    """Every check name written as a literal where a Finding, Note or Fault is made."""
    found = set()
    for path in SRC.rglob("*.py"):
        if "bounces" in path.parts:
            continue  # bounces.reports.Finding is a bounce's, not a check's
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            position = _CODE_ARGUMENT.get(name)
            if position is None or len(node.args) <= position:
                continue
            argument = node.args[position]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                found.add(argument.value)
    return found


@pytest.mark.slow
def test_every_check_that_makes_a_finding_has_a_known_name() -> None:
    codes = emitted_codes()
    assert {"duplicate-url", "unsubscribe", "markup", "link-check", "spf"} <= codes
    assert codes - CHECKS.keys() == set()


def test_the_checks_that_protect_readers_cannot_be_silenced() -> None:
    for name in ("unsubscribe", "markers", "parts", "alt", "spam-score", "spf", "link-check"):
        assert not CHECKS[name].silenceable
        assert CHECKS[name].why
    assert "unsubscribe" not in silenceable()
    assert "duplicate-url" in silenceable()


def test_an_entry_is_a_name_or_a_name_with_urls() -> None:
    assert read_silence("duplicate-url") == Silence("duplicate-url")
    assert read_silence({"http": "http://a.example/"}) == Silence("http", ("http://a.example/",))
    assert read_silence({"duplicate-url": ["https://a/", "https://b/", "https://a/"]}) == (
        Silence("duplicate-url", ("https://a/", "https://b/"))
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("dupe-url", "'dupe-url' is not the name of a check that can be silenced; those are: "),
        ("unsubscribe", "unsubscribe cannot be silenced: every reader must be able to leave"),
        ("markers", "markers cannot be silenced: readers would see the template's code"),
        ({"empty-section": "https://a/"}, "empty-section is not about one URL at a time"),
        ({"http": []}, "http: give the URL(s) whose warnings to silence"),
        (3, "must be a check's name (- duplicate-url) or a name and URLs"),
    ],
)
def test_a_bad_entry_says_why(entry: object, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        read_silence(entry)


def warning(code: str, subject: str = "") -> Finding:
    return Finding("warning", code, f"{code} {subject}", subject)


def test_only_warnings_are_silenced_and_each_silence_says_what_it_held() -> None:
    findings = [
        Finding("error", "size", "past the clip"),  # a silenceable check's error stays
        warning("size"),
        warning("duplicate-url", "https://a/"),
        warning("duplicate-url", "https://b/"),
        warning("http", "http://c/"),
    ]
    silences = [Silence("size"), Silence("duplicate-url", ("https://a/",)), Silence("bidi")]
    shown, silenced = silence_findings(findings, silences)
    assert shown == [findings[0], findings[3], findings[4]]
    assert silenced == [
        Silenced(silences[0], (findings[1],)),
        Silenced(silences[1], (findings[2],)),
        Silenced(silences[2], ()),
    ]
    assert [str(s) for s in silenced] == [
        "size (1)",
        "duplicate-url https://a/ (1)",
        "bidi (nothing to silence)",
    ]


def test_nothing_silenced_without_silences() -> None:
    findings = [warning("duplicate-url", "https://a/")]
    assert silence_findings(findings, []) == (findings, [])


YAML = """\
number: 3
title: T
silence:
  - duplicate-url
  - http: http://old.example.org/
sections:
  - title: S
    items: [{title: a}]
"""


def test_a_yaml_issue_silences_at_its_top_level(tmp_path: Path) -> None:
    path = tmp_path / "3.yaml"
    path.write_text(YAML, encoding="utf-8")
    issue = read_issue_file(path).issue
    assert issue.silence == (
        Silence("duplicate-url"),
        Silence("http", ("http://old.example.org/",)),
    )


def test_a_markdown_issue_silences_in_its_front_matter(tmp_path: Path) -> None:
    path = tmp_path / "3.md"
    path.write_text("---\nnumber: 3\ntitle: T\nsilence: [empty-section]\n---\n## S\n")
    assert read_issue_file(path).issue.silence == (Silence("empty-section"),)


def problems(path: Path) -> list[str]:
    with pytest.raises(IssueError) as caught:
        read_issue_file(path, display=path.name)
    return [f"{p.line}: {p.field}: {p.message}" for p in caught.value.problems]


def test_an_unknown_or_protected_check_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "3.yaml"
    path.write_text(
        YAML.replace("  - duplicate-url\n", "  - dupliate-url\n  - unsubscribe\n"),
        encoding="utf-8",
    )
    assert problems(path) == [
        "4: silence[0]: 'dupliate-url' is not the name of a check that can be silenced; "
        f"those are: {', '.join(silenceable())}",
        "5: silence[1]: unsubscribe cannot be silenced: every reader must be able to leave, "
        "from either part",
    ]
    markdown = tmp_path / "4.md"
    markdown.write_text("---\nnumber: 4\ntitle: T\nsilence:\n  - bidi\n  - clips\n---\n## S\n")
    [problem] = problems(markdown)
    assert problem.startswith("6: silence[1]: 'clips' is not the name of a check")


def test_a_check_named_twice_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "3.md"
    path.write_text("---\nnumber: 3\ntitle: T\nsilence: [bidi, bidi]\n---\n## S\n")
    assert problems(path) == ["4: silence: names bidi twice; keep one entry for each"]
