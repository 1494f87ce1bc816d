"""Where issues live: the issues folder in; the file of issue N (N.yaml, N.yml or N.md) out."""

from __future__ import annotations

import re
from pathlib import Path

from newsletter.errors import IssueError, IssueNotFoundError, Problem, display_path

_ISSUE_FILE = re.compile(r"^(\d+)\.(?:ya?ml|md)$")
SUFFIXES = (".yaml", ".yml", ".md")


def issue_number_of(path: Path) -> int | None:
    """N for a file named N.yaml, N.yml or N.md, else None."""
    match = _ISSUE_FILE.match(path.name)
    return int(match.group(1)) if match else None


def issue_path(issues_dir: Path, number: int) -> Path:
    """The file of issue `number`; an error if there is none, or more than one."""
    found = [
        issues_dir / f"{number}{s}" for s in SUFFIXES if (issues_dir / f"{number}{s}").exists()
    ]
    if len(found) > 1:
        names = " and ".join(path.name for path in found)
        raise IssueError(
            [Problem(display_path(found[0]), None, "", f"issue {number} has two files, {names}")],
            hint="Keep one of them: both would be issue {number}.".replace("{number}", str(number)),
        )
    if found:
        return found[0]
    known = ", ".join(str(n) for n in list_issue_numbers(issues_dir)) or "none"
    wanted = display_path(issues_dir / f"{number}{project_suffix(issues_dir)}")
    raise IssueNotFoundError(
        [Problem(wanted, None, "", f"no such issue (issues: {known})")],
        hint=f"Create {wanted} or pick a listed issue.",
    )


def newest_issue(issues_dir: Path) -> int:
    """The highest issue number in `issues_dir` (the one a command without --issue means);
    IssueNotFoundError when there is none."""
    numbers = list_issue_numbers(issues_dir)
    if not numbers:
        raise IssueNotFoundError(
            [Problem(display_path(issues_dir), None, "", "has no issue yet")],
            hint=f'Write issues/1{project_suffix(issues_dir)} (the manual, "Issue files"), '
            "or give --issue N.",
        )
    return numbers[-1]


def project_suffix(issues_dir: Path) -> str:
    """The suffix the project's issues are written with: its newest issue's (a Markdown project's
    next issue is N.md, a YAML one's N.yaml); `.md`, as `init` starts, when it has none."""
    numbered = [(n, p.suffix) for p in _files(issues_dir) if (n := issue_number_of(p)) is not None]
    return max(numbered)[1] if numbered else ".md"


def list_issue_numbers(issues_dir: Path) -> list[int]:
    found = (issue_number_of(p) for p in _files(issues_dir))
    return sorted({n for n in found if n is not None})


def _files(issues_dir: Path) -> list[Path]:
    return list(issues_dir.iterdir()) if issues_dir.is_dir() else []
