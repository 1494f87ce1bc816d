"""The outbox as the small stores of issue 22 take it: an Outbox in, the Backend they speak out.

Issue 19 rebuilds the outbox as a backend (statements, transactions) with one small store per
table family composed onto it. The stores of subscribers, consent, claims, forgotten people and
site mail (roster.py, consent.py, claims.py, forgotten.py, mailqueue.py) are written for that
composition already: each takes a `Backend` and keeps its SQL inside. Until it lands, this
module lets them run on today's Outbox: `backend_of(outbox)` hands them its statements under the
names the new backend gives them, and `suppressions_of(outbox)` its suppressions under the
names of the new suppressions store. When the composition merges, the stores take
`outbox.backend`, the callers `outbox.suppressions`, and this module goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from newsletter.outbox.base import Outbox
from newsletter.outbox.records import Suppression
from newsletter.outbox.store import Params, Store


class Backend(Protocol):
    """What a store asks of the database (issue 19's `outbox.backend.Backend`)."""

    @property
    def name(self) -> str: ...  # "sqlite" or "postgres"

    @property
    def clock(self) -> str: ...  # SQL for the database's clock in Unix seconds

    @property
    def shared(self) -> bool: ...  # several workers may share the database (PostgreSQL)

    @property
    def skip_locked(self) -> str: ...  # after a claim's inner SELECT

    def run(self, sql: str, params: Params = ()) -> int: ...

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]: ...

    def many(self, sql: str, rows: Iterable[Params]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...


class _StoreBackend:
    """Today's Store under the Backend's names."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.name = store.backend
        self.clock = store.clock
        self.shared = store.shared
        self.skip_locked: str = getattr(store, "skip_locked", "")

    def run(self, sql: str, params: Params = ()) -> int:
        return self._store._run(sql, params)

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._store._fetch(sql, params)

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        self._store._many(sql, rows)

    def transaction(self) -> AbstractContextManager[None]:
        return self._store._write()


def backend_of(outbox: Store) -> Backend:
    """The Backend the stores of this issue run on, for `outbox`."""
    return _StoreBackend(outbox)


class Suppressions(Protocol):
    """Issue 19's suppressions store, as the code of this issue uses it."""

    def add(self, list_name: str, address: str, source: str) -> bool: ...

    def remove(
        self, list_name: str, address: str, *, sources: Iterable[str] | None = None
    ) -> bool: ...

    def contains(self, list_name: str, address: str) -> bool: ...

    def get(self, list_name: str, address: str) -> Suppression | None: ...

    def addresses(self, list_name: str) -> frozenset[str]: ...


class _OutboxSuppressions:
    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def add(self, list_name: str, address: str, source: str) -> bool:
        return self._outbox.suppress(list_name, address, source)

    def remove(self, list_name: str, address: str, *, sources: Iterable[str] | None = None) -> bool:
        return self._outbox.unsuppress(list_name, address, sources=sources)

    def contains(self, list_name: str, address: str) -> bool:
        return self._outbox.is_suppressed(list_name, address)

    def get(self, list_name: str, address: str) -> Suppression | None:
        return self._outbox.suppression(list_name, address)

    def addresses(self, list_name: str) -> frozenset[str]:
        return self._outbox.suppressed(list_name)


def suppressions_of(outbox: Outbox) -> Suppressions:
    """The suppressions of `outbox`, under the new store's names."""
    return _OutboxSuppressions(outbox)
