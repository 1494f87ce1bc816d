"""A sequences folder in (sequences/NAME/NN-slug.md or .yaml); each Sequence and its Steps out,
every fault at file:line.

A step is an issue file read by the issue loader (the same model, templates and checks), with
three keys of its own in the front matter, taken out before the issue is validated:

    after: 2d          # when it goes: after the previous step (the first: after joining)
    from: joining      # optional: count `after` from joining instead of the previous step
    lists: [weekly]    # the first step only: the lists whose new readers join the sequence

A step needs no `number:` (its file name's NN is its number). Numbers order the steps and name
them in the delivery log: a reader who had step 2 gets the next number above 2 that exists, so
a removed step is skipped and a step added later goes to those who have not passed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from newsletter.errors import IssueError, Problem, display_path
from newsletter.issues.files import SUFFIXES
from newsletter.issues.load import IssueFile, read_issue_file
from newsletter.issues.yamlsource import Loc
from newsletter.models import Issue

FOLDER = "sequences"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_STEP_FILE = re.compile(r"^(\d{1,4})-([A-Za-z0-9_-]+)\.(?:ya?ml|md)$")
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_FRONT_BYTES = 64 * 1024  # what `joining` reads of a first step: its front matter is at the top


@dataclass(frozen=True)
class Step:
    sequence: str
    number: int
    slug: str
    file: IssueFile
    after: float  # seconds
    from_joining: bool
    lists: tuple[str, ...]  # the first step's; () on the others

    @property
    def issue(self) -> Issue:
        return self.file.issue

    @property
    def name(self) -> str:
        return f"{self.sequence}/{self.number:02d}-{self.slug}"


@dataclass(frozen=True)
class Sequence:
    name: str
    steps: tuple[Step, ...]

    @property
    def lists(self) -> tuple[str, ...]:
        return self.steps[0].lists if self.steps else ()

    def step(self, number: int) -> Step:
        for step in self.steps:
            if step.number == number:
                return step
        known = ", ".join(str(s.number) for s in self.steps) or "none"
        raise IssueError(
            [Problem(f"{FOLDER}/{self.name}", None, "", f"has no step {number} (steps: {known})")],
            hint=f"Add {FOLDER}/{self.name}/{number:02d}-NAME.md or pick a listed step.",
        )


def parse_delay(value: object) -> float | None:
    """`2d`, `12h`, `30m`, `45s`, `1w` -> seconds; None if it is not one of those."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    if isinstance(value, int):
        return float(value) if value >= 0 else None
    match = _DELAY.match(value)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None


def sequence_names(folder: Path) -> list[str]:
    """The sequences under `folder`, by name (folders named otherwise are not sequences)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and _NAME.match(p.name))


def step_paths(folder: Path) -> list[tuple[int, str, Path]]:
    """A sequence's step files as (number, slug, path), in order; IssueError for two files of
    one number, or a file that is not NN-slug.md."""
    found: dict[int, list[Path]] = {}
    problems: list[Problem] = []
    slugs: dict[int, str] = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.suffix not in SUFFIXES or path.name.startswith("."):
            continue
        match = _STEP_FILE.match(path.name)
        if match is None:
            problems.append(
                Problem(
                    display_path(path),
                    None,
                    "",
                    "is not a step's name: name it NN-slug.md (01-welcome.md, 02-tips.md)",
                )
            )
            continue
        number = int(match.group(1))
        found.setdefault(number, []).append(path)
        slugs[number] = match.group(2)
    for number, paths in found.items():
        if len(paths) > 1:
            names = " and ".join(p.name for p in paths)
            problems.append(
                Problem(display_path(paths[0]), None, "", f"step {number} has two files, {names}")
            )
    if problems:
        raise IssueError(problems, hint="Keep one file per step number, named NN-slug.md.")
    return [(n, slugs[n], found[n][0]) for n in sorted(found)]


def load_sequence(folder: Path, name: str) -> Sequence:
    """Every step of sequences/NAME, each read as an issue; IssueError naming every fault."""
    where = folder / name
    if not _NAME.match(name) or not where.is_dir():
        known = ", ".join(sequence_names(folder)) or "none"
        raise IssueError(
            [Problem(display_path(where), None, "", f"no such sequence (sequences: {known})")],
            hint=f"Create {display_path(where)}/01-welcome.md, or pick a listed sequence.",
        )
    problems: list[Problem] = []
    steps: list[Step] = []
    for index, (number, slug, path) in enumerate(step_paths(where)):
        try:
            steps.append(read_step(name, number, slug, path, first=index == 0))
        except IssueError as exc:
            problems += exc.problems
    if problems:
        raise IssueError(problems)
    if not steps:
        raise IssueError(
            [Problem(display_path(where), None, "", "has no steps")],
            hint=f"Write {display_path(where)}/01-welcome.md with `after:` and `lists:`.",
        )
    return Sequence(name, tuple(steps))


def read_step(sequence: str, number: int, slug: str, path: Path, *, first: bool) -> Step:
    """One step: the issue loader with the step's own keys (module docstring) taken out."""
    own: dict[str, Any] = {}
    name = display_path(path)

    def take(data: dict[str, Any], lines: dict[Loc, int]) -> list[Problem]:
        found: list[Problem] = []
        data.setdefault("number", number)
        after = data.pop("after", None)
        delay = parse_delay(after)
        if delay is None:
            said = "is missing" if after is None else f"is {after!r}"
            found.append(
                Problem(
                    name,
                    lines.get(("after",)),
                    "after",
                    f"{said}: write after: 2d (s, m, h, d or w)",
                )
            )
        own["after"] = delay or 0.0
        start = data.pop("from", "previous")
        if start not in ("previous", "joining"):
            found.append(
                Problem(
                    name, lines.get(("from",)), "from", f"is {start!r}: write joining or previous"
                )
            )
        own["from_joining"] = start == "joining"
        lists = data.pop("lists", None)
        if lists is not None and not first:
            found.append(
                Problem(
                    name,
                    lines.get(("lists",)),
                    "lists",
                    "is read from the sequence's first step only; remove it here",
                )
            )
        elif first and (
            not isinstance(lists, list) or not lists or not all(isinstance(x, str) for x in lists)
        ):
            found.append(
                Problem(
                    name,
                    lines.get(("lists",)),
                    "lists",
                    "must name the lists whose new readers join: lists: [weekly]",
                )
            )
        own["lists"] = tuple(lists) if first and isinstance(lists, list) else ()
        return found

    keys = "title: … and after: 2d" + (" (and lists: [main])" if first else "")
    file = read_issue_file(path, front=take, keys=keys)
    return Step(sequence, number, slug, file, own["after"], own["from_joining"], own["lists"])


def joining(folder: Path, list_name: str) -> list[str]:
    """The sequences whose first step names `list_name` in `lists:`, read from front matter only
    (a reader confirming must not wait for every step to render, nor fail on a step's fault:
    the worker and `check` report those)."""
    names = []
    for name in sequence_names(folder):
        try:
            paths = step_paths(folder / name)
        except IssueError:
            continue
        if paths and list_name in _front_lists(paths[0][2]):
            names.append(name)
    return names


def _front_lists(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            head = handle.read(_FRONT_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    if path.suffix == ".md":
        lines = head.splitlines()
        if not lines or lines[0].strip() != "---":
            return []
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is None:
            return []
        head = "\n".join(lines[1:end])
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        return []
    lists = data.get("lists") if isinstance(data, dict) else None
    return [x for x in lists if isinstance(x, str)] if isinstance(lists, list) else []
