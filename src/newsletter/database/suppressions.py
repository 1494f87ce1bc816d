"""Addresses never mailed again on a list: (list, address, who asked) in; the suppressed out.

Written by the one-click unsubscribe endpoint, `newsletter unsubscribe` and the bounce policy;
read by planning (a suppressed address gets a `skipped` row) and by each claim of a send, which
tells which of its rows are suppressed (leases.py), so an unsubscribe during a run is honoured
within about a second. Addresses are stored in their folded form (subscribers.fold_address).
"""

from __future__ import annotations

from collections.abc import Iterable

from newsletter.database.backend import Backend
from newsletter.database.records import EDITOR_SOURCE, Suppression, now
from newsletter.importers.subscribers import fold_address


class Suppressions:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def add(self, list_name: str, address: str, source: str) -> bool:
        """Never send to `address` on `list_name` again. True if it was not suppressed yet, or
        only by the reader and now by the editor (EDITOR_SOURCE), whose word wins: the reader's
        re-subscribe cannot lift it then."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO suppressions (list, address, source, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (list, address) DO UPDATE"
                " SET source = excluded.source"
                " WHERE excluded.source = ? AND suppressions.source <> ?",
                (list_name, fold_address(address), source, now(), EDITOR_SOURCE, EDITOR_SOURCE),
            )
        return added == 1

    def remove(self, list_name: str, address: str, *, sources: Iterable[str] | None = None) -> bool:
        """Send to `address` again (a re-subscribe). With `sources`, only a suppression recorded
        by one of them is lifted. True if one was."""
        query = "DELETE FROM suppressions WHERE list = ? AND address = ?"
        params: list[str] = [list_name, fold_address(address)]
        if sources is not None:
            chosen = list(sources)
            if not chosen:
                return False
            query += f" AND source IN ({','.join('?' * len(chosen))})"
            params += chosen
        with self.backend.transaction():
            return self.backend.run(query, params) == 1

    def contains(self, list_name: str, address: str) -> bool:
        return bool(
            self.backend.fetch(
                "SELECT 1 FROM suppressions WHERE list = ? AND address = ?",
                (list_name, fold_address(address)),
            )
        )

    def addresses(self, list_name: str) -> frozenset[str]:
        return frozenset(
            r[0]
            for r in self.backend.fetch(
                "SELECT address FROM suppressions WHERE list = ?", (list_name,)
            )
        )

    def get(self, list_name: str, address: str) -> Suppression | None:
        """The suppression of `address` on `list_name` (when, and who asked), or None."""
        found = self.backend.fetch(
            "SELECT list, address, source, created_at FROM suppressions"
            " WHERE list = ? AND address = ?",
            (list_name, fold_address(address)),
        )
        return Suppression(*found[0]) if found else None

    def all(self, list_name: str | None = None) -> list[Suppression]:
        """Every suppression (of one list), oldest first, with when and how it was recorded."""
        where, params = ("WHERE list = ?", (list_name,)) if list_name is not None else ("", ())
        rows = self.backend.fetch(
            f"SELECT list, address, source, created_at FROM suppressions {where}"
            " ORDER BY created_at, list, address",
            params,
        )
        return [Suppression(*r) for r in rows]

    def of_address(self, key: str) -> list[tuple[str, str, str]]:
        """(list, source, created_at) of every suppression of the address `key`."""
        rows = self.backend.fetch(
            "SELECT list, source, created_at FROM suppressions WHERE address = ? ORDER BY list",
            (key,),
        )
        return [(str(li), str(so), str(c)) for li, so, c in rows]

    def drop_address(self, key: str) -> int:
        """Every suppression of the address `key` (it was forgotten: its keyed hash stands in
        for it on every list); how many."""
        with self.backend.transaction():
            return self.backend.run("DELETE FROM suppressions WHERE address = ?", (key,))
