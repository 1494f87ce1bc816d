"""A message's fingerprint and SpamAssassin as it is now in; the score found for them in the last
day, as JSON holds it, out (spamscore.py reads it back as a score, or as none).

A score depends on the message's bytes and on SpamAssassin's rules alone, not on the project,
so it is kept in the user's cache (state/usercache.py), a day for the same message and the same
rules, the program's and the user's preferences included (`rules_stamp`). A kept entry is read
as hostile: an expiry that is not a finite time, or further off than a score is ever kept (a
clock set wrong when it was written, a hand edit), is no score. A hint (what a message is built
from, known before it is built) names the fingerprint last built from it, so SpamAssassin need
not be started ahead for a message whose score is kept.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from newsletter.state import usercache

_KIND = "spam-scores"
REMEMBERED = 86400.0
_HINTS = "spam-hints"
# Where SpamAssassin's rules and local configuration live (Debian's and the upstream default):
# an edited local.cf or an sa-update since a score was kept makes it a score of other rules.
# sa-update writes its rules two folders down (/var/lib/spamassassin/4.000001/updates_…/).
RULES = (Path("/etc/spamassassin"), Path("/etc/mail/spamassassin"), Path("/var/lib/spamassassin"))
RULES_DEPTH = 3  # folders below each of RULES whose files are looked at
RULES_FILES = 5000  # files looked at in all: a bound on the stat calls, never reached by rules
# `spamassassin` also reads the user's own preferences (`score RULE 5` there changes a score).
# The file, not its folder: SpamAssassin writes its Bayes locks and journal beside it on every
# run, so the folder's time would make every run a new stamp and no score would ever be kept.
USER_RULES = Path(".spamassassin") / "user_prefs"


def kept(key: str) -> Any:
    """The score kept for `key` (a fingerprint and a rules stamp) as JSON holds it, or None:
    none kept, expired, or a file that is not what was kept."""
    data = usercache.load(_KIND, key)
    if data is None:
        return None
    try:
        entry = json.loads(data)
        expires = float(entry["expires"])
    except (ValueError, TypeError, KeyError, OverflowError):
        return None
    now = time.time()
    if not math.isfinite(expires) or not now < expires <= now + REMEMBERED:
        return None
    return entry.get("score")


def keep(key: str, score: dict[str, Any]) -> None:
    """Keep `score` for `key` a day."""
    entry = {"expires": time.time() + REMEMBERED, "score": score}
    usercache.keep(_KIND, key, json.dumps(entry).encode())


def hinted(hint: str) -> str | None:
    """The fingerprint of the message last built from `hint`, if one was."""
    data = usercache.load(_HINTS, hint)
    return None if data is None else data.decode(errors="replace")


def keep_hint(hint: str, fingerprint: str) -> None:
    usercache.keep(_HINTS, hint, fingerprint.encode())


def rules_stamp(program: str) -> str:
    """The program and its rules as they are now: its path, size and time, and the newest time
    among the rule folders' files, theirs below them and the user's preferences (a change in any
    of them, a new stamp)."""
    stamps: list[str] = [program]
    try:
        home = [Path.home() / USER_RULES]
    except RuntimeError:  # no home to find: no preferences read from one either
        home = []
    budget = [RULES_FILES]
    for path in (Path(program), *RULES, *home):
        try:
            found = path.stat()
        except OSError:
            continue
        newest = found.st_mtime_ns
        if path.is_dir():
            newest = max(newest, _newest(path, RULES_DEPTH, budget))
        stamps.append(f"{found.st_size}/{newest}")
    return ":".join(stamps)


def _newest(folder: Path, depth: int, budget: list[int]) -> int:
    """The latest modification time of what is in `folder`, `depth` folders down, looking at
    no more than `budget[0]` entries (spent as it goes); unreadable entries are skipped."""
    newest = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
                try:
                    newest = max(newest, entry.stat().st_mtime_ns)
                    if depth > 0 and entry.is_dir(follow_symlinks=False):
                        newest = max(newest, _newest(Path(entry.path), depth - 1, budget))
                except OSError:
                    continue
    except OSError:
        pass
    return newest
