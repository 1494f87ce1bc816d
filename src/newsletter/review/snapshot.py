"""A project at one git revision (or its working tree) -> the files a render reads, in a folder.

`diff` never checks anything out: the editor's working tree stays as it is. The revision's
blobs are read from git's object database (`git ls-tree`, then one `git cat-file --batch`) into a
temporary folder: the config, the templates folder and the issues folder, so the issue is
rendered with the templates and images it had then. The other issues' own files are left out
(they do not change this one's email). The working tree is copied the same way, so both sides
are rendered alike: no outbox, no state folder, the same date.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from newsletter.errors import NewsletterError
from newsletter.issues.files import SUFFIXES

WORKING_TREE = "working tree"
_ISSUE_FILE = re.compile(r"(\d+)\.(md|ya?ml)")
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
        _git(project, "rev-parse", "--show-prefix")
        files = _working_files(project)
        label = WORKING_TREE
    else:
        commit = git_revision(project, rev)
        files = _revision_files(project, commit)
        label = f"{rev} ({commit[:7]})"
    config_text = None
    if config_name in files:
        config_text = (
            (project / config_name).read_text(encoding="utf-8", errors="replace")
            if rev is None
            else _git(project, "cat-file", "blob", files[config_name]).decode("utf-8", "replace")
        )
    wanted = _wanted(files, number, config_name, config_text)
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
    files: dict[str, str], number: int, config_name: str, config_text: str | None
) -> list[str]:
    """The config, the templates and the issues folder (but other issues' own files)."""
    issues, templates = "issues", "templates/email"
    if config_text is not None:
        folders = _config_paths(config_text)
        issues, templates = folders.get("issues", issues), folders.get("templates", templates)
    keep = []
    names = _issue_names(number)
    for path in files:
        if path == config_name or _under(path, templates):
            keep.append(path)
        elif _under(path, issues):
            name = PurePosixPath(path).name
            if not _ISSUE_FILE.fullmatch(name) or name in names:
                keep.append(path)
    return keep


def _config_paths(text: str) -> dict[str, str]:
    """[paths] issues and templates as the revision's config sets them (relative ones only:
    an absolute folder is outside the repository and read where it is)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}  # the settings will name the fault at its line when the file is loaded
    table = data.get("paths", {})
    return {
        key: str(PurePosixPath(value))
        for key, value in (table.items() if isinstance(table, dict) else [])
        if key in ("issues", "templates") and isinstance(value, str) and not value.startswith("/")
    }


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


def _working_files(project: Path) -> dict[str, str]:
    return {
        path.relative_to(project).as_posix(): ""
        for path in project.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and ".git" not in path.relative_to(project).parts
    }


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
