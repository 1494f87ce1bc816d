"""An issue's data and the lines of its values in; each image under issues/ given its size
from its file, and the Notes `check` reports on images (no size, no alt text, a tracking
pixel, too heavy for a phone), out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from newsletter.errors import Problem, display_path
from newsletter.fields import IMAGE_TYPES
from newsletter.formats.imagefile import NotAnImageError, read_image_info
from newsletter.issues.yamlsource import Loc, error_field, line_of
from newsletter.markup import Note

HEAVY_IMAGE = 1024 * 1024  # bytes: more than this is slow to load on a phone


def measure_images(
    data: dict[str, Any], lines: dict[Loc, int], folder: Path, name: str
) -> tuple[list[Problem], list[Note]]:
    """Give each image under issues/ its size from the file; note images without one."""
    problems: list[Problem] = []
    notes: list[Note] = []
    unsized: list[tuple[int, str]] = []
    undescribed: list[int] = []
    for loc, image in _images(data, ()):
        line = line_of(lines, loc) or 1
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
        field = error_field(loc)
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
        elif kind in ("quote", "callout"):
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
