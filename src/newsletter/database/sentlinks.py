"""The links a tracked send carried: (issue, list, mode, each place's URL) in, at the start of
every run of the send; the URL at a place, and the send's mode and when it was recorded, out.

A click token names a place, never a URL (mail/clicktokens.py); the redirect answers with the
URL this snapshot holds there, the link the messages of that send were built with, whatever the
issue file says today. A later run of the same send (a resume, a retry) writes its own links
over the earlier ones, and one made with tracking off writes nothing, so the tokens already out
keep their links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from newsletter.database.backend import Backend
from newsletter.database.records import now
from newsletter.rendering.places import Place, Region


class TrackedSend(NamedTuple):
    """What a tracked send recorded: its mode, when (ISO 8601, UTC), and its links by place."""

    mode: str
    recorded_at: str
    links: dict[Place, str]


class SentLinks:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def record(
        self, issue: int, list_name: str, mode: str, links: Sequence[tuple[Place, str]]
    ) -> None:
        """The send of `issue` to `list_name` carries `links` in `mode`: in one transaction,
        replacing what an earlier run recorded."""
        rows = [
            (issue, list_name, int(place.region), place.section, place.item, place.link, url)
            for place, url in links
        ]
        with self.backend.transaction():
            self.backend.run(
                "INSERT INTO tracked_sends (issue, list, mode, recorded_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (issue, list) DO UPDATE SET mode = excluded.mode,"
                " recorded_at = excluded.recorded_at",
                (issue, list_name, mode, now()),
            )
            self.backend.run(
                "DELETE FROM tracked_links WHERE issue = ? AND list = ?", (issue, list_name)
            )
            if rows:
                self.backend.many(
                    "INSERT INTO tracked_links (issue, list, region, section, item, link, url)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )

    def links(self, issue: int, list_name: str) -> dict[Place, str] | None:
        """Every place of the send and its URL; None when the send was never tracked."""
        if self.mode(issue, list_name) is None:
            return None
        return self._places(issue, list_name)

    def _places(self, issue: int, list_name: str) -> dict[Place, str]:
        found = self.backend.fetch(
            "SELECT region, section, item, link, url FROM tracked_links"
            " WHERE issue = ? AND list = ?",
            (issue, list_name),
        )
        return {Place(Region(r), s, i, n): url for r, s, i, n, url in found}

    def tracked(self, issue: int, list_name: str) -> TrackedSend | None:
        """The send's mode, when its last tracked run recorded it, and its links; None when the
        send was never tracked."""
        found = self.backend.fetch(
            "SELECT mode, recorded_at FROM tracked_sends WHERE issue = ? AND list = ?",
            (issue, list_name),
        )
        if not found:
            return None
        mode, recorded_at = found[0]
        return TrackedSend(str(mode), str(recorded_at), self._places(issue, list_name))

    def mode(self, issue: int, list_name: str) -> str | None:
        """The mode of the send's last tracked run ("aggregate", "per-reader"), or None."""
        found = self.backend.fetch(
            "SELECT mode FROM tracked_sends WHERE issue = ? AND list = ?", (issue, list_name)
        )
        return str(found[0][0]) if found else None
