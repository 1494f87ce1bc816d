"""An issue file in (YAML or Markdown); a validated Issue out, every fault at its file:line, and
the Notes `check` reports (markup the email cannot carry, images without a size).

One pipeline for both formats, each step a call in order: the source gives data and the line of
every value; a YAML file's text fields are read as Markdown; images under issues/ are measured;
Pydantic validates; its error locations are mapped back to lines. The file name and `number` are
compared in the same run, so that mismatch is reported with the other errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from newsletter.errors import IssueError, Problem, display_path
from newsletter.formats.textfile import SAVE_AS_UTF8, UTF16, looks_like_utf16
from newsletter.issues.files import issue_number_of, issue_path
from newsletter.issues.images import measure_images
from newsletter.issues.markdownsource import ISSUE_KEYS, read_markdown
from newsletter.issues.yamlsource import INLINE_FIELDS, Loc, Source, error_field, line_of, read_yaml
from newsletter.markup import Note, parse_content, parse_inline
from newsletter.models import Issue

_BLOCK_KINDS = {"paragraph", "heading", "image", "quote", "callout", "list", "code_block"}
_BLOCK_KINDS |= {"rule", "table"}
_SPAN_KINDS = {"text", "code", "strong", "em", "strike", "link", "break"}
MAX_ISSUE_BYTES = 2 * 1024 * 1024  # an issue's text: 20 times what Gmail shows before its clip


@dataclass(frozen=True)
class IssueFile:
    issue: Issue
    path: Path
    display: str  # the path as the editor typed it, for messages
    notes: tuple[Note, ...] = ()
    # Each kind of block the issue holds and the line of its first one: what the project's own
    # templates must have a branch for (templateblocks.py).
    block_lines: tuple[tuple[str, int], ...] = ()


def load_issue(issues_dir: Path, number: int) -> Issue:
    return load_issue_file(issue_path(issues_dir, number))


def load_issue_file(path: Path, *, display: str | None = None) -> Issue:
    """Parse and validate one issue file; raise IssueError listing every problem found."""
    return read_issue_file(path, display=display).issue


# A caller's own front-matter keys: given the data and its lines, takes them out (a sequence's
# step: `after`, `lists`) and returns what is wrong with them, checked with everything else.
FrontKeys = Callable[[dict[str, Any], dict[Loc, int]], list[Problem]]


def read_issue_file(
    path: Path, *, display: str | None = None, front: FrontKeys | None = None, keys: str = ""
) -> IssueFile:
    """The Issue and the Notes about its source; IssueError listing every problem found.
    `keys`: the front matter's keys as an empty or headless file's problem names them (a
    sequence step's; default: an issue's)."""
    name = display or display_path(path)
    text = read_issue_text(path, name)
    source: Source
    notes: list[Note] = []
    if path.suffix == ".md":
        markdown = read_markdown(text, name, keys or ISSUE_KEYS)
        source, notes = markdown, list(markdown.notes)
    else:
        source = read_yaml(text, name)
    problems = list(source.problems)
    data = source.data
    if not problems and not isinstance(data, dict):
        wanted = f": {keys}, and sections" if keys else " with number, title, sections"
        problems.append(Problem(name, 1, "", f"must be a mapping{wanted}"))
    mismatch = number_mismatch(path, data, source.lines, name)
    if problems:
        raise IssueError(problems + mismatch)
    if path.suffix != ".md":
        notes += read_text_fields(data, source)
    image_problems, image_notes = measure_images(data, source.lines, path.parent, name)
    notes += image_notes
    if front is not None:
        problems += front(data, source.lines)
    try:
        issue = Issue.model_validate(data)
        problems += [_unheld(name, source.lines, issue, place) for place in issue.unheld_dead()]
    except ValidationError as exc:
        problems += [_problem(name, source.lines, err) for err in exc.errors()]
    problems += image_problems + mismatch
    if problems:
        raise IssueError(problems)
    kinds = first_block_lines(data, source.lines)
    return IssueFile(issue, path, name, tuple(sorted(notes, key=lambda n: n.line)), kinds)


def first_block_lines(data: Any, lines: dict[Loc, int]) -> tuple[tuple[str, int], ...]:
    """Each block kind in `data` with the line of its first block (the nearest line recorded
    for it or a block around it), in the order of those lines."""
    first: dict[str, int] = {}

    def walk(value: Any, loc: Loc) -> None:
        if isinstance(value, dict):
            kind = value.get("kind")
            if kind in _BLOCK_KINDS:
                at = loc
                while at and at not in lines:
                    at = at[:-1]
                line = lines.get(at, 0)
                first[kind] = min(first.get(kind, line), line)
            for key, inner in value.items():
                if key != "spans":  # spans hold no blocks
                    walk(inner, (*loc, key))
        elif isinstance(value, list):
            for place, inner in enumerate(value):
                walk(inner, (*loc, place))

    walk(data, ())
    return tuple(sorted(first.items(), key=lambda pair: pair[1]))


def read_issue_text(path: Path, name: str) -> str:
    """The file's text, or IssueError before anything parses it: a file over MAX_ISSUE_BYTES
    (parsing one of 10 MB took 640 MB), one saved as UTF-16, one that is not UTF-8."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_ISSUE_BYTES + 1)  # no more, though the file may be larger
    except OSError as exc:
        raise IssueError([Problem(name, None, "", f"cannot read: {exc.strerror}")]) from None
    if len(raw) > MAX_ISSUE_BYTES:
        raise IssueError(
            [
                Problem(
                    name,
                    None,
                    "",
                    f"is larger than {MAX_ISSUE_BYTES // 1024 // 1024} MB, so it was not read "
                    "(Gmail clips an email past 102 KB)",
                )
            ],
            hint="Is this the issue file? Keep an issue's text short and link the long pieces.",
        )
    if looks_like_utf16(raw):
        raise IssueError([Problem(name, None, "", UTF16)], hint=SAVE_AS_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise IssueError(
            [Problem(name, line, "", "is not valid UTF-8; save the file as UTF-8")]
        ) from None


def number_mismatch(path: Path, data: Any, lines: dict[Loc, int], name: str) -> list[Problem]:
    named = issue_number_of(path)
    number = data.get("number") if isinstance(data, dict) else None
    if named is None or not isinstance(number, int) or isinstance(number, bool):
        return []
    if named == number:
        return []
    return [
        Problem(
            name,
            lines.get(("number",)),
            "number",
            f"is {number} but the file is named {path.name}; make them match",
        )
    ]


def read_text_fields(data: dict[str, Any], source: Source) -> list[Note]:
    """A YAML file's titles, summaries and intros, read as Markdown in place (at their lines)."""
    notes: list[Note] = []

    def read(container: Any, key: str, loc: Loc) -> None:
        value = container.get(key) if isinstance(container, dict) else None
        if not isinstance(value, str):
            return  # not text: validation says what it should be
        scalar = source.scalars.get(loc)
        first = scalar.first_line if scalar else source.lines.get(loc, 1)
        if key in INLINE_FIELDS:
            spans, found = parse_inline(value, first)
            container[key] = spans
        else:
            text = scalar.literal if scalar and scalar.literal is not None else value
            parsed = parse_content(text, first)
            container[key] = parsed.blocks
            source.lines.update({(*loc, *place): line for place, line in parsed.lines.items()})
            found = parsed.notes
        notes.extend(found)

    read(data, "intro", ("intro",))
    read(data, "outro", ("outro",))
    sections = data.get("sections")
    for s, section in enumerate(sections if isinstance(sections, list) else []):
        read(section, "title", ("sections", s, "title"))
        read(section, "intro", ("sections", s, "intro"))
        items = section.get("items") if isinstance(section, dict) else None
        for i, item in enumerate(items if isinstance(items, list) else []):
            read(item, "title", ("sections", s, "items", i, "title"))
            read(item, "summary", ("sections", s, "items", i, "summary"))
    return notes


def _problem(name: str, lines: dict[Loc, int], err: Any) -> Problem:
    # Pydantic names the kind of block or span it tried ("paragraph", "link"): not in a path.
    loc: Loc = tuple(
        part
        for part in err["loc"]
        if not (isinstance(part, str) and part in _BLOCK_KINDS | _SPAN_KINDS)
    )
    return Problem(name, line_of(lines, loc), error_field(loc), _friendly(err))


def _unheld(name: str, lines: dict[Loc, int], issue: Issue, place: int) -> Problem:
    url = issue.dead[place].url
    message = f"{url} is not a link of this issue: copy the link as the issue has it"
    return Problem(name, line_of(lines, ("dead", place)), f"dead[{place}]", message)


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
