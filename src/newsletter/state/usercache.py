"""A kind of work and the key of what it was worked out from in; what was worked out before, if
this user's cache folder still has it, out.

Each `newsletter` command is a new process, and every one that renders an issue compiled the
templates and parsed them for the markers check anew: most of a render's time, and the same
answer each time, since it depends only on the templates' text. That work is kept here, per
user and not per project (a template shipped in the package is the same in every project):
under the platform's user cache folder (platformdirs: `$XDG_CACHE_HOME/newsletter`, else
`~/.cache/newsletter` on Linux), one file per answer, named by a hash of its key. Nothing
kept here is a reader's or a secret: compiled template code and the line numbers of template
markers.

Compiled code is loaded from this folder, so a folder another user could write would run their
code: the folder is made 0700, and one that is not this user's own, or that others may write, is
not used at all. A folder that cannot be made or written, or a file that cannot be read, is no
error: the work is done again, as with no cache. At most `KEPT` answers of a kind are kept;
past that, the oldest go first (a preview's day of template edits leaves one per save).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

import platformdirs

KEPT = 256
_NAME = "newsletter"


def load(kind: str, key: str) -> bytes | None:
    """The bytes kept for `key` of `kind`, or None."""
    folder = _folder(kind, create=False)
    if folder is None:
        return None
    try:
        return (folder / _file_name(key)).read_bytes()
    except OSError:
        return None


def keep(kind: str, key: str, data: bytes) -> None:
    """Keep `data` for `key` of `kind`, if the folder can be had (else nothing)."""
    folder = _folder(kind, create=True)
    if folder is None:
        return
    path = folder / _file_name(key)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)  # a reader sees the old answer or the whole new one
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        return
    _prune(folder)


def root() -> Path:
    """The user's cache folder for this tool (which may not exist yet): platformdirs' rule for
    the platform (on Linux the XDG one, a relative $XDG_CACHE_HOME ignored)."""
    return Path(platformdirs.user_cache_dir(_NAME, appauthor=False))


def _file_name(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _folder(kind: str, *, create: bool) -> Path | None:
    """`root()/kind`, if it and `root()` are this user's and closed to others' writes."""
    try:
        base = root()
        folder = base / kind
        if create:
            base.parent.mkdir(parents=True, exist_ok=True)
            for part in (base, folder):
                with contextlib.suppress(FileExistsError):
                    part.mkdir(mode=0o700)
        for part in (base, folder):
            found = os.lstat(part)
            if (
                not stat.S_ISDIR(found.st_mode)
                or found.st_uid != os.getuid()
                or found.st_mode & 0o022
            ):
                return None
    except (OSError, RuntimeError):  # RuntimeError: no home folder to be found
        return None
    return folder


def _prune(folder: Path) -> None:
    try:
        entries = [entry for entry in os.scandir(folder) if entry.is_file()]
        if len(entries) <= KEPT:
            return
        entries.sort(key=lambda entry: entry.stat().st_mtime)
        for entry in entries[: len(entries) - KEPT // 2]:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    except OSError:
        return
