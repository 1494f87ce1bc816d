"""The project's state kept private whatever the umask: a path in; the folder (0700) or file
(0600) made, or tightened when it is ours and looser, out; and the one pid-keeping lock the
send and the worker take.

The state folder (`.newsletter/`) holds the outbox (every reader's address, their consent and
what was sent to them), its -wal and -shm, the preflight cache, the capture Maildir and the
locks: nothing in it is for another user of the machine. A umask of 022 would make each new
file 0644 in a 0755 folder; here the mode is given at creation, where the umask can only take
bits away. A folder or file an earlier version made world-readable loses other users' access
when it is found, if this user owns it; group access stays (a deployment where `serve` runs as
another user of the group may need it), and another user's file is left as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

FOLDER = 0o700
FILE = 0o600


def private_folder(path: Path, *, tighten: bool = True) -> Path:
    """`path` as a folder, made 0700 if it is new (its missing parents as the umask says: they
    are the user's); with `tighten`, an existing one of ours loses other users' access."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=FOLDER)
    except FileExistsError:
        if tighten:
            _tighten(path)
    return path


def private_file(path: Path) -> Path:
    """`path` as a file, made 0600 (empty) if it is new, else tightened if it is ours."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE))
    except FileExistsError:
        _tighten(path)
    return path


def open_private(path: Path, mode: str, **options: Any) -> IO[Any]:
    """`open(path, mode)`, a file it creates made 0600, one it finds tightened."""
    if path.exists():
        _tighten(path)
    return open(path, mode, opener=lambda p, flags: os.open(p, flags, FILE), **options)


def write_private(path: Path, text: str) -> None:
    """`text` (UTF-8) into `path`, a new file made 0600."""
    with open_private(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@contextmanager
def held_lock(path: Path, refused: Callable[[str], Exception]) -> Iterator[None]:
    """An exclusive lock on `path` (0600, in a private folder) for the block, holding this
    process's pid for whoever is refused next; `refused(pid)` is raised when another process
    holds it. flock is released by the kernel when the process dies, so a killed run never
    leaves a stale lock behind."""
    private_folder(path.parent)
    with open_private(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise refused(handle.read().strip() or "?") from None
        # The pid only tells the next run who holds the lock: a full disk must not stop this
        # one (written unbuffered, so closing the file has nothing left to fail on).
        with contextlib.suppress(OSError):
            os.ftruncate(handle.fileno(), 0)
            os.pwrite(handle.fileno(), str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tighten(path: Path) -> None:
    """Other users' access taken away (the owner's and the group's stay), if this user owns
    `path`."""
    with contextlib.suppress(OSError):
        found = path.stat()
        if found.st_uid == os.getuid() and found.st_mode & 0o007:
            path.chmod(found.st_mode & 0o770)
