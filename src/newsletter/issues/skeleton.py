"""An issue file in (last week's); the next issue's file out: its number, title and date, and the
sections of the one before with nothing in them, in the same format (`newsletter new`).

Each section title is copied as it was written (its `code` and links stay), read from the same
source and line the loader read it from; the issue it starts from must load, so a broken one is
reported, never half-copied. What belongs to one issue is left behind: items, intros, the cover,
the preheader, its `silence:` (a judgment about that issue's warnings, not the next one's) and
its `dead:` (that issue's links).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from newsletter.errors import IssueError, IssueNotFoundError, Problem, display_path
from newsletter.i18n import ISSUE_TITLE, strings_for
from newsletter.issues.files import issue_path, list_issue_numbers
from newsletter.issues.load import IssueFile, read_issue_file
from newsletter.issues.markdownsource import read_markdown
from newsletter.issues.yamlsource import read_yaml

# What sets a title's subtitle apart from its name and number: "Weekly 14: Rust in the kernel",
# "第14期｜大模型", "Crab Post 14 — async" (a colon, a bar, a dash between spaces, a middle dot).
_SUBTITLE_SEPARATOR = re.compile(r"\s*(?:[:：|｜·・]|\s[-–—]\s|[–—])\s*")
# An ATX heading's text: without its #s and an optional closing sequence.
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(?P<text>.*?))?(?:[ \t]+#+)?[ \t]*$")


@dataclass(frozen=True)
class Skeleton:
    """The next issue's file, not yet written."""

    path: Path
    text: str
    number: int
    source: IssueFile  # the issue it was started from
    sections: tuple[str, ...]  # their titles as written


def start_issue(
    issues_dir: Path,
    today: dt.date,
    *,
    number: int | None = None,
    start_from: int | None = None,
    name: str,
    language: str,
) -> Skeleton:
    """Issue `number` (default: after the highest) from issue `start_from` (default: the
    highest); IssueError if the number is taken, there is nothing to start from, or the issue
    started from does not load."""
    numbers = list_issue_numbers(issues_dir)
    if not numbers and start_from is None:
        raise IssueError(
            [Problem(display_path(issues_dir), None, "", "has no issue to start from")],
            hint='Write the first issue by hand (the manual, "Issue files"): `newsletter new` '
            "starts each next one from the last.",
        )
    origin = start_from if start_from is not None else max(numbers)
    try:
        path = issue_path(issues_dir, origin)
    except IssueNotFoundError as exc:
        raise IssueNotFoundError(
            exc.problems, hint="Give --from the number of a listed issue to take its sections."
        ) from None
    number = number if number is not None else max(numbers) + 1
    if number in numbers:
        taken = issue_path(issues_dir, number)
        raise IssueError(
            [Problem(display_path(taken), None, "", f"issue {number} exists already")],
            hint=f"`newsletter new` never overwrites an issue: edit {display_path(taken)}, or "
            "give another --number.",
        )
    try:
        source = read_issue_file(path)
    except IssueError as exc:
        raise IssueError(
            exc.problems,
            hint=f"`newsletter new` starts from issue {origin}'s sections: fix the lines named "
            "above, or start from another issue with --from N.",
        ) from None
    text = path.read_text(encoding="utf-8")
    markdown = path.suffix == ".md"
    titles = _markdown_titles(text, source) if markdown else _yaml_titles(text, source)
    title = next_title(source.issue.title, source.issue.number, number, name, language)
    head = f"number: {number}\ntitle: {yaml_value(title)}\ndate: {today.isoformat()}\n"
    if markdown:
        body = "".join(f"\n## {section}\n" for section in titles)
        written = f"---\n{head}---\n{body}"
    else:
        body = "".join(f"  - title: {yaml_value(t)}\n    items: []\n" for t in titles)
        written = head + ("sections:\n" + body if titles else "")
    return Skeleton(issues_dir / f"{number}{path.suffix}", written, number, source, titles)


def write_skeleton(skeleton: Skeleton) -> None:
    """Create the file; one made meanwhile (another `new`, an editor) is never overwritten."""
    try:
        with skeleton.path.open("x", encoding="utf-8") as file:
            file.write(skeleton.text)
    except FileExistsError:
        raise IssueError(
            [Problem(display_path(skeleton.path), None, "", "exists already")],
            hint="`newsletter new` never overwrites an issue: give another --number.",
        ) from None


def next_title(title: str, old: int, new: int, name: str, language: str) -> str:
    """The last title with its number moved on (`第14期` -> `第15期`), or the newsletter's name
    and the number when the last title does not carry it. A subtitle (`Weekly 14: Rust in the
    kernel`) was that issue's, not the next one's: only the part with the number is kept."""
    found = list(re.finditer(rf"(?<!\d){old}(?!\d)", title))
    if found:
        last = found[-1]
        moved = f"{title[: last.start()]}{new}{title[last.end() :]}"
        # The part between separators that holds the number is the title's name and number.
        start, end, shift = 0, len(title), len(moved) - len(title)
        for separator in _SUBTITLE_SEPARATOR.finditer(title):
            if separator.end() <= last.start():
                start = separator.end()
            elif separator.start() >= last.end():
                end = separator.start()
                break
        return moved[start : end + shift].strip()
    words = strings_for(ISSUE_TITLE, language, name=name)
    return words["title"].replace("{number}", str(new))


def yaml_value(text: str) -> str:
    """`text` as a YAML value reads back as itself: plain when it can be, else double-quoted
    (JSON's string syntax is YAML's)."""
    try:
        plain = yaml.safe_load(f"key: {text}\n") == {"key": text}
    except yaml.YAMLError:
        plain = False
    return text if plain and text == text.strip() else json.dumps(text, ensure_ascii=False)


def _yaml_titles(text: str, source: IssueFile) -> tuple[str, ...]:
    data: Any = read_yaml(text, source.display).data
    written = [s.get("title") if isinstance(s, dict) else None for s in data["sections"]]
    return tuple(
        raw if isinstance(raw, str) else section.title.text
        for raw, section in zip(written, source.issue.sections, strict=True)
    )


def _markdown_titles(text: str, source: IssueFile) -> tuple[str, ...]:
    lines = text.splitlines()
    read = read_markdown(text, source.display)
    titles = []
    for index, section in enumerate(source.issue.sections):
        line = lines[read.lines[("sections", index, "title")] - 1]
        heading = _ATX.match(line)
        # A setext heading (a line underlined with === or ---) is its text line as it is.
        raw = (heading.group("text") or "") if heading else line.strip()
        titles.append(raw.strip() or section.title.text)
    return tuple(titles)
