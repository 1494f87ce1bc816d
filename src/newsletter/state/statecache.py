"""A JSON file under .newsletter/ in, answers remembered for a while out.

The link check and the DNS lookups put what they learned here (preflight-cache.json), so the
preview's live reload (one check per save) and a second `newsletter check --online` do not ask
the network again (the archive's link check keeps archive-cache.json the same way).
Each entry carries its own expiry; a missing, unreadable or foreign file is an empty cache, never
an error. The file is ours but read as hostile all the same: an expiry that is not a finite
number, or one further off than the caller's `longest` keeps anything (a clock set wrong when it
was written, a hand edit), is dropped, so nothing kept outlives what it was kept for.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from newsletter.state.statefiles import private_folder, write_private

FILE_NAME = "preflight-cache.json"
VERSION = 1


class Cache:
    """Entries `key -> (expires_at, value)`; `value` is anything JSON can hold."""

    def __init__(
        self, path: Path | None, *, clock: Any = time.time, longest: float | None = None
    ) -> None:
        """`longest`: the longest time-to-live this cache is given; a read entry that would
        live longer is not ours to trust (None: no bound)."""
        self.path = path
        self._clock = clock
        self._longest = longest
        self._entries: dict[str, tuple[float, Any]] = {}
        self._dirty = False
        if path is not None:
            self._entries = _read(path)

    def get(self, key: str) -> Any | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._clock()
        if entry[0] <= now or (self._longest is not None and entry[0] > now + self._longest):
            return None
        return entry[1]

    def put(self, key: str, value: Any, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._dirty = True

    def save(self) -> None:
        """Write the live entries back (atomically: a reader never sees half a file)."""
        if self.path is None or not self._dirty:
            return
        now = self._clock()
        live = {key: list(entry) for key, entry in self._entries.items() if entry[0] > now}
        partial = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            private_folder(self.path.parent)
            write_private(partial, json.dumps({"version": VERSION, "entries": live}))
            os.replace(partial, self.path)
        except OSError:
            # A cache that cannot be written (a read-only checkout, a full disk) is only a
            # cache: the answers were found; the next run asks again. Never the command's error.
            with contextlib.suppress(OSError):
                partial.unlink()
            return
        self._dirty = False


def _read(path: Path) -> dict[str, tuple[float, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {
        key: (expiry, entry[1])
        for key, entry in entries.items()
        if isinstance(entry, list) and len(entry) == 2 and (expiry := _expiry(entry[0])) is not None
    }


def _expiry(value: object) -> float | None:
    """A written expiry as a time, or None: JSON's NaN and Infinity never expire, and an integer
    too large for a float raises OverflowError (a traceback from a file of ours)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        found = float(value)
    except OverflowError:
        return None
    return found if math.isfinite(found) else None
