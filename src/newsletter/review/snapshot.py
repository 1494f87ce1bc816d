"""A project at one git revision (or its working tree) -> the files a render reads, in a folder.

`diff` never checks anything out: the editor's working tree stays as it is. The revision's
blobs are read from git's object database (`git ls-tree`, then one `git cat-file --batch`) into a
temporary folder: the config, the templates folder and the issues folder, so the issue is
rendered with the templates and images it had then. The other issues' own files are left out
(they do not change this one's email). The working tree is copied the same way, so both sides
are rendered alike: no outbox, no state folder, the same date.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from newsletter.errors import NewsletterError
from newsletter.issues.files import SUFFIXES, issue_number_of

WORKING_TREE = "working tree"
_BLOB_MODES = {"100644", "100755"}  # no symlink, no submodule: what a render can read


class RevisionError(NewsletterError):
    """Git cannot give the project or the issue at a revision."""


@dataclass(frozen=True)
class Snapshot:
    """The project files of one revision, written under `root`."""

    label: str  # what the output calls this side: "HEAD (1a2b3c4)" or "working tree"
    root: Path
    config: Path


def git_revision(project: Path, rev: str) -> str:
    """The commit `rev` names in the repository holding `project`, as a full hash."""
    _git(project, "rev-parse", "--show-prefix")  # not a repository: said before anything else
    try:
        if rev.startswith("-"):  # git would read it as one of its options, not a revision
            raise RevisionError(rev)
        return (
            _git(project, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
        )
    except RevisionError:
        raise RevisionError(
            f"unknown revision {rev!r}",
            hint="Name a commit git knows: HEAD, HEAD~1, a branch, a tag or a hash (git log).",
        ) from None


def take_snapshot(
    project: Path, rev: str | None, number: int, config_name: str, into: Path
) -> Snapshot:
    """The files issue `number` is rendered from at `rev` (None: the working tree), in `into`."""
    if rev is None:
        _git(project, "rev-parse", "--show-prefix")  # not a repository: said first
        label = WORKING_TREE
        config = project / config_name
        config_text = config.read_text("utf-8", "replace") if config.is_file() else None
        folders = _folders(config_text)
        files = _working_files(project, [config_name, *folders])
    else:
        commit = git_revision(project, rev)
        label = f"{rev} ({commit[:7]})"
        files = _revision_files(project, commit)
        blob = files.get(config_name)
        config_text = None if blob is None else _git(project, "cat-file", "blob", blob).decode()
        folders = _folders(config_text)
    if config_text is None:
        raise RevisionError(
            f"{label} has no {config_name}: the project's settings are part of what is compared",
            hint=f"Compare revisions that hold the project (git add {config_name}).",
        )
    wanted = _wanted(files, number, config_name, folders)
    if not any(PurePosixPath(p).name in _issue_names(number) for p in wanted):
        raise RevisionError(
            f"issue {number} is not in {label}: no {number}.md, {number}.yaml or {number}.yml "
            "in its issues folder",
            hint="Compare revisions that have the issue (git log -- issues/), or add its file.",
        )
    if rev is None:
        for path in wanted:
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(project / path, into / path)
    else:
        _write_blobs(project, {path: files[path] for path in wanted}, into)
    return Snapshot(label, into, into / config_name)


def _wanted(
    files: dict[str, str], number: int, config_name: str, folders: tuple[str, str]
) -> list[str]:
    """The config, the templates and the issues folder (but other issues' own files)."""
    issues, templates = folders
    return [
        path
        for path in files
        if path == config_name
        or _under(path, templates)
        or (_under(path, issues) and issue_number_of(Path(path)) in (None, number))
    ]


def _folders(text: str | None) -> tuple[str, str]:
    """The issues and templates folders as the revision's config sets them in [paths]
    (relative ones only: an absolute folder is outside the repository, read where it is)."""
    try:
        table = tomllib.loads(text or "").get("paths", {})
    except tomllib.TOMLDecodeError:
        table = {}  # the settings name the fault at its line when the file is loaded
    found = {
        key: str(PurePosixPath(value))
        for key, value in (table.items() if isinstance(table, dict) else [])
        if key in ("issues", "templates") and isinstance(value, str) and not value.startswith("/")
    }
    return found.get("issues", "issues"), found.get("templates", "templates/email")


def _issue_names(number: int) -> set[str]:
    return {f"{number}{suffix}" for suffix in SUFFIXES}


def _under(path: str, folder: str) -> bool:
    return folder in (".", "") or path.startswith(folder.rstrip("/") + "/")


def _revision_files(project: Path, commit: str) -> dict[str, str]:
    """Each file of the project folder at `commit` (paths relative to the project, as ls-tree
    lists them from there) -> its blob's hash."""
    listing = _git(project, "ls-tree", "-r", "-z", commit).decode("utf-8", "surrogateescape")
    files = {}
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, blob = meta.split()
        if kind == "blob" and mode in _BLOB_MODES:
            files[path] = blob
    return files


def _working_files(project: Path, names: list[str]) -> dict[str, str]:
    """The files under each of `names` in the working tree (only those: a project can hold a
    virtualenv or a site build that a walk of the whole folder would read for nothing)."""
    found = []
    for name in names:
        top = project / name
        found += [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
    return {p.relative_to(project).as_posix(): "" for p in found if not p.is_symlink()}


def _write_blobs(project: Path, blobs: dict[str, str], into: Path) -> None:
    """Every blob at once through one `git cat-file --batch`, each to its path in `into`."""
    order = list(blobs.items())
    request = "".join(f"{blob}\n" for _, blob in order).encode()
    out = _git(project, "cat-file", "--batch", stdin=request)
    at = 0
    for path, _ in order:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1


def _git(project: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(project), *args], input=stdin, capture_output=True, check=False
        )
    except FileNotFoundError:
        raise RevisionError(
            "git is not installed", hint="Install git: diff reads both versions from it."
        ) from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        if said and "not a git repository" in said[0]:
            raise RevisionError(
                f"{project}: not a git repository",
                hint="Run diff in a project kept in git (git init; git add; git commit).",
            )
        raise RevisionError(
            f"git {args[0]} failed: {said[-1] if said else done.returncode}",
            hint="Check the revisions with git log.",
        )
    return done.stdout
