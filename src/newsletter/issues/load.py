"""An issue file in (YAML or Markdown); a validated Issue out, every fault at its file:line, and
the Notes `check` reports (markup the email cannot carry, images without a size).

One pipeline for both formats, each step a call in order: the source gives data and the line of
every value; a YAML file's text fields are read as Markdown; images under issues/ are measured;
Pydantic validates; its error locations are mapped back to lines. The file name and `number` are
compared in the same run, so that mismatch is reported with the other errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from newsletter.errors import IssueError, Problem, display_path
from newsletter.fields import IMAGE_TYPES
from newsletter.imagefile import NotAnImageError, read_image_info
from newsletter.issues.files import issue_number_of, issue_path
from newsletter.issues.markdownsource import read_markdown
from newsletter.issues.yamlsource import Loc, Source, field_name, read_yaml
from newsletter.markup import Note, parse_content, parse_inline
from newsletter.models import Issue
from newsletter.textfile import SAVE_AS_UTF8, UTF16, looks_like_utf16

# The fields whose text is Markdown; an error inside one is named by the field, at its line.
CONTENT_FIELDS = {"intro", "outro", "summary"}
INLINE_FIELDS = {"title"}
_BLOCK_KINDS = {"paragraph", "heading", "image", "quote", "list", "code_block", "rule", "table"}
_SPAN_KINDS = {"text", "code", "strong", "em", "strike", "link", "break"}
HEAVY_IMAGE = 1024 * 1024  # bytes: more than this is slow to load on a phone
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
    path: Path, *, display: str | None = None, front: FrontKeys | None = None
) -> IssueFile:
    """The Issue and the Notes about its source; IssueError listing every problem found."""
    name = display or display_path(path)
    text = read_issue_text(path, name)
    source: Source
    notes: list[Note] = []
    if path.suffix == ".md":
        markdown = read_markdown(text, name)
        source, notes = markdown, list(markdown.notes)
    else:
        source = read_yaml(text, name)
    problems = list(source.problems)
    data = source.data
    if not problems and not isinstance(data, dict):
        problems.append(Problem(name, 1, "", "must be a mapping with number, title, sections"))
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


def measure_images(
    data: dict[str, Any], lines: dict[Loc, int], folder: Path, name: str
) -> tuple[list[Problem], list[Note]]:
    """Give each image under issues/ its size from the file; note images without one."""
    problems: list[Problem] = []
    notes: list[Note] = []
    unsized: list[tuple[int, str]] = []
    undescribed: list[int] = []
    for loc, image in _images(data, ()):
        line = _line(lines, loc) or 1
        src = image.get("src")
        if not str(image.get("alt") or "").strip():
            undescribed.append(line)
        if not isinstance(src, str) or not src:
            continue
        if src.startswith(("http:", "https:")) or "://" in src:
            if image.get("width") == 1 and image.get("height") == 1:
                notes.append(_pixel_note(line, src))
            elif not (image.get("width") and image.get("height")):
                unsized.append((line, src))
            continue
        path = folder / src
        if ".." in Path(src).parts or not src.lower().endswith(IMAGE_TYPES):
            continue  # validation refuses it, with the reason
        field = _field(loc)
        try:
            info = read_image_info(path)
        except FileNotFoundError:
            problems.append(
                Problem(name, line, field, f"{src}: no such file in {display_path(folder)}")
            )
            continue
        except OSError as exc:
            problems.append(Problem(name, line, field, f"{src}: cannot read: {exc.strerror}"))
            continue
        except NotAnImageError as exc:
            problems.append(Problem(name, line, field, f"{src} {exc}"))
            continue
        width, height = image.get("width"), image.get("height")
        if not width and not height:
            image["width"], image["height"] = info.width, info.height
        elif isinstance(width, int) and not height:
            image["height"] = max(1, round(info.height * width / info.width))
        elif isinstance(height, int) and not width:
            image["width"] = max(1, round(info.width * height / info.height))
        if info.size > HEAVY_IMAGE:
            notes.append(
                Note(
                    "warning",
                    "image-weight",
                    line,
                    f"{src} is {info.size / HEAVY_IMAGE:.1f} MB: readers on a phone wait for it; "
                    "keep an image under 1 MB",
                )
            )
    if unsized:
        notes.append(_unsized_note(unsized))
    if undescribed:
        notes.append(_undescribed_note(undescribed))
    return problems, notes


def _pixel_note(line: int, src: str) -> Note:
    """A remote 1×1 image shows nothing: it is there to be fetched, telling its host who opened
    the email, when, and from which address."""
    return Note(
        "warning",
        "tracking-pixel",
        line,
        f"{src} is a 1×1 image, a tracking pixel: each reader's mail client fetches it, telling "
        "its host who opened the email, when and from where; remove it",
    )


def _undescribed_note(lines: list[int]) -> Note:
    """One note for every image without alt text: pasted weeklies write `![](…)` by habit."""
    which = (
        "an image has"
        if len(lines) == 1
        else f"{len(lines)} images have (lines {', '.join(str(n) for n in lines)})"
    )
    return Note(
        "warning",
        "alt",
        lines[0],
        f"{which} no alt text, so a screen reader says nothing of it, nor does a mail client "
        "that blocks images: describe each, ![a café by a stream](…), or put a short caption "
        "line right under it",
    )


def _unsized_note(unsized: list[tuple[int, str]]) -> Note:
    """One note for every image without a size: a pasted weekly has dozens."""
    (line, src), more = unsized[0], unsized[1:]
    which = (
        f"the image {src} has"
        if not more
        else (f"{len(unsized)} images have (lines {', '.join(str(n) for n, _ in unsized)})")
    )
    return Note(
        "warning",
        "image-size",
        line,
        f"{which} no size, so the email's layout jumps as they load (and Outlook shows them "
        "at full size): give it, ![…](…){width=600 height=400}, or save the image under "
        "issues/ and link the file",
    )


def _images(data: dict[str, Any], loc: Loc) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """Every image's data with its location: the cover, and the image blocks in the text."""
    if isinstance(data.get("cover"), dict):
        yield ("cover",), data["cover"]
    for key in ("intro", "outro"):
        yield from _block_images(data.get(key), (key,))
    sections = data.get("sections")
    for s, section in enumerate(sections if isinstance(sections, list) else []):
        if not isinstance(section, dict):
            continue
        yield from _block_images(section.get("intro"), ("sections", s, "intro"))
        items = section.get("items")
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                yield from _block_images(
                    item.get("summary"), ("sections", s, "items", i, "summary")
                )


def _block_images(blocks: Any, loc: Loc) -> Iterator[tuple[Loc, dict[str, Any]]]:
    for index, block in enumerate(blocks if isinstance(blocks, list) else []):
        if not isinstance(block, dict):
            continue
        kind = block.get("kind")
        if kind == "image":
            yield (*loc, index), block
        elif kind == "quote":
            yield from _block_images(block.get("blocks"), (*loc, index, "blocks"))
        elif kind == "list":
            for e, entry in enumerate(block.get("items") or []):
                yield from _block_images(entry, (*loc, index, "items", e))
        elif kind == "table":
            yield from _cell_images(block, (*loc, index))


def _cell_images(table: dict[str, Any], loc: Loc) -> Iterator[tuple[Loc, dict[str, Any]]]:
    for c, cell in enumerate(table.get("head") or []):
        yield from _block_images(cell, (*loc, "head", c))
    for r, row in enumerate(table.get("rows") or []):
        for c, cell in enumerate(row if isinstance(row, list) else []):
            yield from _block_images(cell, (*loc, "rows", r, c))


def _line(lines: dict[Loc, int], loc: Loc) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _problem(name: str, lines: dict[Loc, int], err: Any) -> Problem:
    # Pydantic names the kind of block or span it tried ("paragraph", "link"): not in a path.
    loc: Loc = tuple(
        part
        for part in err["loc"]
        if not (isinstance(part, str) and part in _BLOCK_KINDS | _SPAN_KINDS)
    )
    return Problem(name, _line(lines, loc), _field(loc), _friendly(err))


def _field(loc: Loc) -> str:
    """The path up to the text field an error is in: inside it, the line says where."""
    for index, part in enumerate(loc):
        if part in CONTENT_FIELDS or (part in INLINE_FIELDS and index > 0):
            return field_name(loc[: index + 1])
    return field_name(loc)


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
