"""The package's default templates and a project's templates folder in; copies of the defaults
out (`newsletter templates eject`), and which copies the package has changed since.

A project's templates/email/ wins over the defaults file by file (render.template_environment):
a copy taken once stays as it was while the package's own moves on (a new kind of block, a fix
for a mail client), and nothing would tell the editor. So each copy is recorded in the folder's
ejected.toml with the package version and the sha256 of the default it was copied from; `check`
compares that hash with the default the installed package has now (`behind`), and the copy's
own hash says whether the editor has edited it since (an unedited copy can simply be taken
again). A file in the folder that ejected.toml does not name is the editor's own: nothing to
compare it with.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from newsletter.distribution import installed_version
from newsletter.errors import TemplateError, display_path
from newsletter.rendering.render import DEFAULT_TEMPLATE_DIRS

RECORD = "ejected.toml"  # in the project's templates folder, beside the copies
_SUFFIXES = (".mjml", ".txt", ".css")
_HEAD = (
    "# Written by `newsletter templates eject`: the package's template each file here was\n"
    "# copied from (its sha256). `newsletter check` warns when the installed package's template\n"
    "# has changed since; `newsletter templates follow NAME` records that you took the change.\n"
)


@dataclass(frozen=True)
class Copy:
    """One ejected template as ejected.toml records it."""

    name: str
    version: str  # the tool's version it was copied from
    sha256: str  # the package's template then, which the copy was, byte for byte
    day: str  # when (ISO date)


@dataclass(frozen=True)
class TemplateState:
    """One of the package's templates, as the project has it."""

    name: str
    path: Path  # the project's copy (which may not exist)
    copy: Copy | None  # ejected.toml's entry, if any
    exists: bool  # the project has a file of that name
    edited: bool  # the copy differs from what was ejected
    behind: bool  # the package's template has changed since it was ejected

    @property
    def kind(self) -> str:
        """`shipped` (no copy: the package's is used), `ejected`, or `own` (a copy
        ejected.toml does not name)."""
        if not self.exists:
            return "shipped"
        return "ejected" if self.copy is not None else "own"


def shipped_dir() -> Path:
    """The folder the installed package's templates are in (the wheel's, or a source tree's)."""
    for folder in DEFAULT_TEMPLATE_DIRS:
        if (folder / "issue.mjml").is_file():
            return folder
    raise TemplateError(
        "the package's default templates are missing (no issue.mjml in "
        + " or ".join(str(d) for d in DEFAULT_TEMPLATE_DIRS)
        + ")",
        hint="Reinstall the tool: its wheel carries newsletter/default_templates/email.",
    )


def shipped_names() -> list[str]:
    return sorted(p.name for p in shipped_dir().iterdir() if p.suffix in _SUFFIXES)


def eject(templates_dir: Path, names: list[str], *, force: bool = False) -> list[Path]:
    """Copy the package's templates `names` (all of them when empty) into `templates_dir` and
    record each in ejected.toml; the paths written. A file already there is never overwritten
    without `force`, and nothing is written then."""
    source = shipped_dir()
    _not_the_defaults(templates_dir, source)
    chosen = _known(names) if names else shipped_names()
    there = [templates_dir / n for n in chosen if (templates_dir / n).exists()]
    if there and not force:
        listed = ", ".join(display_path(p) for p in there)
        raise TemplateError(
            f"{listed}: already in the project (nothing was copied)",
            hint="Keep your copy, name only the templates you have not taken, or add --force "
            "to replace it with the package's (your edits to it are lost).",
        )
    records = read_record(templates_dir)
    templates_dir.mkdir(parents=True, exist_ok=True)
    day = dt.date.today().isoformat()
    version = installed_version() or "source"
    written = []
    for name in chosen:
        target = templates_dir / name
        shutil.copyfile(source / name, target)
        records[name] = Copy(name, version, _sha256(target), day)
        written.append(target)
    _write_record(templates_dir, records)
    return written


def follow(templates_dir: Path, names: list[str]) -> list[Copy]:
    """Record that the copies `names` now follow the package's current templates (the editor
    took the change by hand): `check` stops warning about them."""
    records = read_record(templates_dir)
    source = shipped_dir()
    missing = [n for n in _known(names) if n not in records]
    if missing:
        raise TemplateError(
            f"{display_path(templates_dir / RECORD)}: {', '.join(missing)} "
            "was never ejected (no record of it)",
            hint="`newsletter templates` lists the ejected ones; `newsletter templates eject "
            "NAME` takes a copy.",
        )
    version = installed_version() or "source"
    day = dt.date.today().isoformat()
    chosen = _known(names)
    for name in chosen:
        records[name] = Copy(name, version, _sha256(source / name), day)
    _write_record(templates_dir, records)
    return [records[n] for n in chosen]


def states(templates_dir: Path) -> list[TemplateState]:
    """Each of the package's templates, and what the project has of it."""
    source = shipped_dir()
    defaults = templates_dir.resolve() == source.resolve()
    records = {} if defaults else read_record(templates_dir)
    found = []
    for name in shipped_names():
        path = templates_dir / name
        copy = records.get(name)
        exists = path.is_file() and not defaults
        edited = exists and copy is not None and _sha256(path) != copy.sha256
        behind = exists and copy is not None and _sha256(source / name) != copy.sha256
        found.append(TemplateState(name, path, copy, exists, edited, behind))
    return found


def behind(templates_dir: Path) -> list[TemplateState]:
    """The ejected copies whose package template has changed since (what `check` warns of)."""
    if not (templates_dir / RECORD).is_file():
        return []
    return [s for s in states(templates_dir) if s.behind]


def read_record(templates_dir: Path) -> dict[str, Copy]:
    """ejected.toml's entries by template name ({} when there is none)."""
    path = templates_dir / RECORD
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"{display_path(path)}: cannot be read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(
            f"{display_path(path)}: {exc}",
            hint="Fix the line named, or delete the file and take the copies again "
            "(`newsletter templates eject --force NAME`).",
        ) from None
    records = {}
    for name, entry in data.get("templates", {}).items():
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) for key in ("version", "sha256", "day")
        ):
            raise TemplateError(
                f"{display_path(path)}: [templates.{json.dumps(name)}] needs version, sha256 and "
                "day (strings)",
                hint="Take the copy again (`newsletter templates eject --force NAME`): it "
                "writes the entry.",
            )
        records[name] = Copy(name, entry["version"], entry["sha256"], entry["day"])
    return records


def _write_record(templates_dir: Path, records: dict[str, Copy]) -> None:
    lines = [_HEAD]
    for name in sorted(records):
        copy = records[name]
        # json.dumps quotes as TOML's basic strings do for these (names, hex, versions).
        lines.append(
            f"\n[templates.{json.dumps(name)}]\nversion = {json.dumps(copy.version)}\n"
            f"sha256 = {json.dumps(copy.sha256)}\nday = {json.dumps(copy.day)}\n"
        )
    (templates_dir / RECORD).write_text("".join(lines), encoding="utf-8")


def _known(names: list[str]) -> list[str]:
    shipped = shipped_names()
    unknown = [n for n in names if n not in shipped]
    if unknown:
        raise TemplateError(
            f"{', '.join(repr(n) for n in unknown)}: the package has no such template",
            hint=f"Name one of: {', '.join(shipped)}.",
        )
    return list(dict.fromkeys(names))


def _not_the_defaults(templates_dir: Path, source: Path) -> None:
    """The tool's own source tree: its templates folder is the package's, nothing to copy."""
    if templates_dir.resolve() == source.resolve():
        raise TemplateError(
            f"{display_path(templates_dir)}: is the package's own templates folder",
            hint="Eject into a project of your own (`newsletter init mynews`), or point "
            "[paths] templates elsewhere.",
        )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
