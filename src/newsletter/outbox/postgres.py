"""The outbox in PostgreSQL through psycopg 3: a `postgresql://` URL in, the Outbox interface out.

Many machines share one database: each statement outside a transaction commits at once
(autocommit), and a write transaction serialises with the others on a transaction-level advisory
lock, the same guarantee SQLite's BEGIN IMMEDIATE gives on one machine. The password comes from
the URL in the environment (NEWSLETTER_OUTBOX__URL), PGPASSWORD or ~/.pgpass, never the config
file, and is never printed.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from newsletter.dburl import redact, scrub
from newsletter.errors import DeliveryError
from newsletter.outbox.base import Outbox
from newsletter.outbox.schema import Migration
from newsletter.outbox.store import Params

# Advisory lock keys (one 64-bit number each, shared by every newsletter on the database).
WRITE_LOCK = 0x6E6C_0001
MIGRATION_LOCK = 0x6E6C_0002


@functools.lru_cache(maxsize=256)
def _sql(query: str) -> str:
    """The shared `?` placeholders as psycopg's `%s` (the schema has no literal `?` or `%`)."""
    return query.replace("%", "%%").replace("?", "%s")


class PostgresOutbox(Outbox):
    backend = "postgres"
    clock = "extract(epoch from clock_timestamp())::float8"
    skip_locked = "FOR UPDATE SKIP LOCKED"
    shared = True
    errors = psycopg.Error

    target: str

    def __init__(self, target: str, *, migrate: bool = True) -> None:
        self.target = target
        try:
            self._db = psycopg.connect(target, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise DeliveryError(
                # libpq's message may quote a value of the URL (a bad %-escape in a password).
                f"{self.display}: cannot connect to the outbox database:"
                f" {scrub(_first_line(exc), target)}",
                hint="Check [outbox] url (NEWSLETTER_OUTBOX__URL), that the server runs and"
                " that this user may connect (password in PGPASSWORD or ~/.pgpass).",
            ) from None
        try:
            if migrate:
                self.migrate()
        except psycopg.Error as exc:
            self._db.close()
            raise DeliveryError(
                f"{self.display}: cannot prepare the outbox schema: {_first_line(exc)}",
                hint="The database user needs the right to create tables in its schema.",
            ) from None
        except BaseException:
            self._db.close()
            raise

    @property
    def display(self) -> str:
        return redact(self.target)

    def close(self) -> None:
        self._db.close()

    @property
    def broken(self) -> bool:
        return self._db.broken

    def _run(self, sql: str, params: Params = ()) -> int:
        cur = self._db.execute(_sql(sql), params)
        return cur.rowcount

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(_sql(sql), params).fetchall()

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        with self._db.cursor() as cur:
            cur.executemany(_sql(sql), rows)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            yield

    def _script(self, migration: Migration) -> str:
        return migration.postgres

    @contextmanager
    def plan_lock(self, issue: int, list_name: str) -> Iterator[None]:
        # A session lock: the plan commits batch by batch under it, and a planner that dies
        # drops its connection and with it the lock.
        key = plan_key(issue, list_name)
        self._db.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            self._db.execute("SELECT pg_advisory_unlock(%s)", (key,))


def plan_key(issue: int, list_name: str) -> int:
    """The advisory lock of one send's planning: 64 bits of a hash of (issue, list)."""
    digest = hashlib.sha256(f"newsletter plan {issue} {list_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
