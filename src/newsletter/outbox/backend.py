"""What a store of the outbox runs its SQL through: statements in; rows, row counts and
transactions out.

A store (clicks.py, sentlinks.py, sendfigures.py) is a class of its own that takes a Backend and
holds its SQL, written once for both databases (`?` placeholders, ON CONFLICT, row values). The
Backend is the four calls a store needs: `run` one statement (committed at once outside a
transaction), `fetch` rows, `many` (one statement per row, inside a transaction), and
`transaction`, which holds the database's write lock from its start. `StoreBackend` gives them
over the Outbox of store.py, whose methods of the same meaning are its backend's private ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from newsletter.outbox.store import Params, Store


class Backend(Protocol):
    @property
    def name(self) -> str:
        """ "sqlite" or "postgres"."""
        ...

    def run(self, sql: str, params: Params = ()) -> int: ...

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...

    def many(self, sql: str, rows: Iterable[Params]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...


class StoreBackend:
    """A Backend over an open Outbox (its connection, its error mapping, its write lock)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def name(self) -> str:
        return self._store.backend

    def run(self, sql: str, params: Params = ()) -> int:
        return self._store._run(sql, params)

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._store._fetch(sql, params)

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        self._store._many(sql, rows)

    def transaction(self) -> AbstractContextManager[None]:
        return self._store._write()
