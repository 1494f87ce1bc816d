"""A child a send forks (the list's reader, a worker process): the parent's pid and the
descriptors the child needs in; a child that dies with its parent and holds nothing else of it out.

fork copies every open descriptor, and each copy keeps what it names alive: the send lock's file
(its flock stays taken while any copy is open, so every re-run is refused), the outbox's
database socket (the PostgreSQL backend, and the advisory locks its session holds, stay alive),
the read end of the child's own pipe (a child whose only reader is itself blocks for ever once
the pipe is full), the parent's SMTP sessions. `detach` closes all of them but stdin, stdout,
stderr and the ones it is told to keep, and asks the kernel to kill the child the moment the
parent dies (PR_SET_PDEATHSIG; elsewhere a watchdog thread polls the parent), so a `kill -9` of
the send takes its children with it and leaves no lock and no connection behind.

A child that opens the outbox itself (a worker) must not be forked while the parent has it open:
SQLite keeps its record of a file's locks and shared memory per process, on the parent's
descriptors, and a child's new connection would take it over (Database.disconnected closes the
parent's connection across the fork).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable

_PR_SET_PDEATHSIG = 1


def detach(parent: int, keep: Iterable[int]) -> None:
    """Called first thing in a child forked by `parent`: die with it, drop what it inherited."""
    die_with(parent)
    drop_descriptors(keep)
    # Python writes each signal's number to the wakeup descriptor an event loop of the parent
    # set: a loop the child never runs.
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)


def die_with(parent: int, signum: int = signal.SIGKILL) -> None:
    """`signum` (SIGKILL) to this process when `parent` dies, however it dies."""
    import ctypes  # here: only a child needs it, and every send would import it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    if not armed:
        threading.Thread(target=_watch, args=(parent, signum), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the guard was in place
        os.kill(os.getpid(), signum)


def _watch(parent: int, signum: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os.kill(os.getpid(), signum)


def drop_descriptors(keep: Iterable[int]) -> None:
    """Every descriptor but 0, 1, 2 and `keep` now points at /dev/null. Not closed: objects
    copied from the parent (its outbox connection, its event loop) still hold those numbers,
    and a number closed here could be given to a file the child opens later, which a stray
    write of theirs (a finaliser's goodbye to the database) would then reach."""
    kept = {0, 1, 2, *keep}
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in open_descriptors():
            if fd not in kept and fd != null and _is_open(fd):  # not the listing's own
                # One the process may not touch (a tool's own: valgrind's log) stays.
                with contextlib.suppress(OSError):
                    os.dup2(null, fd)
    finally:
        os.close(null)


def open_descriptors() -> list[int]:
    """This process's open descriptors (Linux's /proc, the BSDs' and macOS's /dev/fd)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return sorted(int(name) for name in os.listdir(folder))
        except OSError:
            continue
    return [fd for fd in range(3, 4096) if _is_open(fd)]


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True
