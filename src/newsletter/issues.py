"""issues/N.yaml -> a validated Issue; every fault comes back as `path:line: field: message`.

YAML is composed into nodes first so each value keeps the line it was written on; Pydantic's error
locations are then mapped back to those lines. Duplicate keys, which YAML loaders silently collapse,
are reported too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from newsletter.errors import IssueError, IssueNotFoundError, Problem, display_path
from newsletter.models import Issue

Loc = tuple[str | int, ...]
_ISSUE_FILE = re.compile(r"^(\d+)\.ya?ml$")
# sections[0].items[0].links[0].url is 6 levels deep; libyaml allows 1,000, which is enough to
# exhaust Python's stack in whatever walks the result.
MAX_DEPTH = 12
_STR_TAG = "tag:yaml.org,2002:str"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_SCALARS = yaml.constructor.SafeConstructor()


def issue_number_of(path: Path) -> int | None:
    """N for a file named N.yaml or N.yml, else None."""
    match = _ISSUE_FILE.match(path.name)
    return int(match.group(1)) if match else None


def issue_path(issues_dir: Path, number: int) -> Path:
    """The file of issue `number`: N.yaml (or N.yml) in the issues folder."""
    for suffix in (".yaml", ".yml"):
        path = issues_dir / f"{number}{suffix}"
        if path.exists():
            return path
    known = ", ".join(str(n) for n in list_issue_numbers(issues_dir)) or "none"
    raise IssueNotFoundError(
        [
            Problem(
                display_path(issues_dir / f"{number}.yaml"),
                None,
                "",
                f"no such issue (issues: {known})",
            )
        ],
        hint=f"Create {display_path(issues_dir / f'{number}.yaml')} or pick a listed issue.",
    )


def list_issue_numbers(issues_dir: Path) -> list[int]:
    if not issues_dir.is_dir():
        return []
    found = (issue_number_of(p) for p in issues_dir.iterdir())
    return sorted({n for n in found if n is not None})


def load_issue(issues_dir: Path, number: int) -> Issue:
    return load_issue_file(issue_path(issues_dir, number))


def load_issue_file(path: Path, *, display: str | None = None) -> Issue:
    """Parse and validate one issue file; raise IssueError listing every problem found."""
    name = display or display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise IssueError(
            [Problem(name, line, "", "is not valid UTF-8; save the file as UTF-8")]
        ) from None
    except OSError as exc:
        raise IssueError([Problem(name, None, "", f"cannot read: {exc.strerror}")]) from None
    data, lines, problems = _parse(text, name)
    if problems:
        raise IssueError(problems)
    if not isinstance(data, dict):
        raise IssueError([Problem(name, 1, "", "must be a mapping with number, title, sections")])
    try:
        issue = Issue.model_validate(data)
    except ValidationError as exc:
        raise IssueError([_problem(name, lines, err) for err in exc.errors()]) from None
    named = issue_number_of(path)
    if named is not None and named != issue.number:
        raise IssueError(
            [
                Problem(
                    name,
                    lines.get(("number",)),
                    "number",
                    f"is {issue.number} but the file is named {path.name}; make them match",
                )
            ]
        )
    return issue


def _parse(text: str, name: str) -> tuple[Any, dict[Loc, int], list[Problem]]:
    # libyaml's parser keeps node marks too and is much faster than the pure-Python one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, [Problem(name, 1, "", "is empty")]
        index = _Index(name)
        index.walk(node, (), node.start_mark.line + 1)
        if index.problems:
            return None, index.lines, index.problems
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(s for s in (exc.context, exc.problem) if s)
        return None, {}, [Problem(name, line, "", f"is not valid YAML: {what}")]
    except yaml.YAMLError as exc:
        return None, {}, [Problem(name, None, "", f"is not valid YAML: {exc}")]
    finally:
        loader.dispose()
    return data, index.lines, index.problems


class _Index:
    """The line of every value by its field path, plus what YAML lets through silently:
    duplicate keys, and aliases (a few nested ones expand to billions of values)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: dict[Loc, int] = {}
        self.problems: list[Problem] = []
        self._seen: set[int] = set()

    def walk(self, node: yaml.Node, loc: Loc, line: int) -> None:
        # A value's problem is reported on its key's line, where the editor looks.
        self.lines[loc] = line
        if id(node) in self._seen:
            self._problem(line, loc, "repeats another value with a YAML alias; write it out")
            return
        if len(loc) > MAX_DEPTH and not isinstance(node, yaml.ScalarNode):
            self._problem(line, loc, f"is nested more than {MAX_DEPTH} levels deep")
            return
        if isinstance(node, yaml.ScalarNode):
            self._check_scalar(node, loc, line)
            return
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self._seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    self._problem(key_line, loc, "has a key that is a list or mapping, not a name")
                    continue
                key = str(key_node.value)
                if key in keys:
                    self._problem(key_line, (*loc, key), "is given twice")
                keys.add(key)
                self.walk(value_node, (*loc, key), key_line)
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                # An alias's node carries its anchor's line; the editor wrote it on this one.
                alias = id(child) in self._seen
                self.walk(child, (*loc, i), line if alias else child.start_mark.line + 1)

    def _check_scalar(self, node: yaml.ScalarNode, loc: Loc, line: int) -> None:
        """Build the value as the loader will: YAML's constructors raise bare ValueError and
        worse for `date: 2021-02-30` or `!!int abc`, which would be a traceback."""
        if node.tag == _STR_TAG:
            return  # text cannot fail to build (and nearly every value of an issue is text)
        construct = _SCALARS.yaml_constructors.get(node.tag)
        if construct is None:
            return  # an unknown tag: the loader reports it with its line
        try:
            construct(_SCALARS, node)
        except Exception as exc:  # whatever it raises, the value is unusable
            if node.tag == _TIMESTAMP_TAG:
                reason = f" ({exc})" if isinstance(exc, ValueError) else ""
                self._problem(
                    line,
                    loc,
                    f"{node.value} is not a real date{reason}; "
                    'fix it, or put it in quotes if it is meant as text: "2021-02-30"',
                )
            else:
                kind = node.tag.rpartition(":")[2]
                self._problem(line, loc, f"{node.value!r} cannot be read as YAML !!{kind}")

    def _problem(self, line: int, loc: Loc, message: str) -> None:
        self.problems.append(Problem(self.name, line, _field(loc), message))


def _problem(name: str, lines: dict[Loc, int], err: Any) -> Problem:
    loc: Loc = tuple(err["loc"])
    line = None
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            line = lines[loc[:end]]
            break
    message = _friendly(err)
    return Problem(name, line, _field(loc), message)


def _friendly(err: Any) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field (check its spelling)"
    if kind == "string_type":
        return f"must be text, got {err['input']!r} (put it in quotes)"
    if kind.startswith("value_error"):
        return str(msg).removeprefix("Value error, ")
    return str(msg)


def _field(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
