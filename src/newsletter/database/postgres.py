"""The outbox in PostgreSQL through psycopg 3: a `postgresql://` URL in, a Backend out.

Many machines share one database: each statement outside a transaction commits at once
(autocommit), and a write transaction serialises with the others on a transaction-level advisory
lock, the same guarantee SQLite's BEGIN IMMEDIATE gives on one machine. A batch (the journal's
group commit) goes out in pipeline mode: its statements and the commit in one round trip, as one
implicit transaction, without that lock (its statements touch only rows its worker holds). The
journal's commits during a send (`send_commit`) go on a second connection, opened when the first
is sent, as one prepared statement sent without waiting: the worker's event loop watches the
socket for the reply and goes on meanwhile, and its other statements need not wait behind it.
A send's claims ahead of its sessions (`send_fetch`) go the same way on a third connection, so
a claim never waits behind a commit nor a commit behind a claim.
`synchronous_commit` follows the durability: off for "process" (the server acknowledges a commit
before its WAL reaches the disk: it survives this process being killed, not a crash of the
server's machine), on for "power". The password comes from the URL in the environment
(NEWSLETTER_OUTBOX__URL), PGPASSWORD or ~/.pgpass, never the config file, and is never printed.

Every psycopg error a statement raises once connected becomes an DatabaseError here (`_fault`): the
connection lost (a restart, a failover, pg_terminate_backend), the server's disk full, a
read-only standby, a missing privilege, a cancelled statement, damaged data.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg import pq

from newsletter.config.dburl import redact_url, scrub
from newsletter.database.backend import Backend, Durability, Landing, Params, Statement
from newsletter.database.lanes import Lane, Sent
from newsletter.database.schema import Migration
from newsletter.errors import DatabaseError

# Advisory lock keys (one 64-bit number each, shared by every newsletter on the database); a
# send's planning lock is a hash of its (issue, list) (plans.py).
WRITE_LOCK = 0x6E6C_0001
MIGRATION_LOCK = 0x6E6C_0002


class _Reported(logging.Filter):
    """psycopg logs a warning when a pipeline whose connection is lost fails to end, and raises
    the error that lost it: that error is mapped (`_fault`) and reported once; the warning
    would be a second line on the user's terminal, unmapped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("error ignored terminating <psycopg.Pipeline")


logging.getLogger("psycopg").addFilter(_Reported())


@functools.lru_cache(maxsize=256)
def _sql(query: str) -> str:
    """The shared `?` placeholders as PostgreSQL's own `$1`, `$2`, ... (the schema has no
    literal `?`). The connection's cursors are RawCursors, which hand them to the server as
    they are: psycopg converts its own `%s` anew for a statement of more than 50 parameters
    (a journal's batch), at a cost that outgrew the statement's own."""
    parts = query.split("?")
    numbered = [f"{part}${n}" for n, part in enumerate(parts[:-1], start=1)]
    return "".join(numbered) + parts[-1]


class PostgresBackend(Backend):
    name = "postgres"
    clock = "extract(epoch from clock_timestamp())::float8"
    skip_locked = "FOR UPDATE SKIP LOCKED"
    shared = True

    target: str

    def __init__(
        self, target: str, *, durability: Durability = "process", migrate: bool = True
    ) -> None:
        self.target = target
        self.durability = durability
        self.reconnect()
        try:
            if migrate:
                self.migrate()
        except BaseException:
            self._db.close()
            raise

    @property
    def display(self) -> str:
        return redact_url(self.target)

    def close(self) -> None:
        for lane in self._lanes.values():
            lane.conn.close()
        self._db.close()

    def reconnect(self) -> None:
        self._db = self._connect()
        # The connections of statements sent without waiting, by what they carry ("journal",
        # "claims"), each opened when its first statement is sent.
        self._lanes: dict[str, Lane] = {}

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            db = psycopg.connect(
                self.target, autocommit=True, connect_timeout=10, cursor_factory=psycopg.RawCursor
            )
        except psycopg.Error as exc:
            raise DatabaseError(
                # libpq's message may quote a value of the URL (a bad %-escape in a password).
                f"{self.display}: cannot connect to the outbox database:"
                f" {scrub(_first_line(exc), self.target)}",
                hint="Check [outbox] url (NEWSLETTER_OUTBOX__URL), that the server runs and"
                " that this user may connect (password in PGPASSWORD or ~/.pgpass).",
            ) from None
        # A server ending the session (a restart, pg_terminate_backend) says why in a FATAL
        # message; in pipeline mode libpq hands it to the notice handler, not the error.
        self._farewell = ""
        db.add_notice_handler(self._noticed)
        synchronous = "on" if self.durability == "power" else "off"
        try:
            db.execute(f"SET synchronous_commit = {synchronous}")
        except psycopg.Error as exc:
            db.close()
            raise self._fault(exc) from exc
        return db

    def _noticed(self, notice: psycopg.errors.Diagnostic) -> None:
        if notice.severity in ("FATAL", "PANIC") and notice.message_primary:
            self._farewell = notice.message_primary

    @property
    def broken(self) -> bool:
        return self._db.broken

    def _usable(self) -> psycopg.Connection[Any]:
        """The main connection, replaced first if a signal left one of its statements unread.

        A SIGINT or SIGTERM raised (coordinator.Interrupted) between psycopg sending a statement
        and reading its result leaves the session busy: every later statement, the stopping
        run's own unlock and retire among them, would fail with "another command is already in
        progress" and replace the clear "stopped by SIGINT" with a lost outbox. The session's
        locks go with it, which is what a stopping run gives back anyway; the journal's
        connection is left alone (its commit is read by whoever waits for it)."""
        if self._db.info.transaction_status == pq.TransactionStatus.ACTIVE:
            # Else the server runs the statement on, holding the session's locks; a session
            # already gone took them with it. A cancel that reaches the server before it has
            # read the statement is lost (it cancels only a running one), and a closed socket
            # is noticed only when the statement ends: the new session ends the old one.
            pid = self._db.info.backend_pid
            with suppress(psycopg.Error):
                self._db.cancel()
            self._db.close()
            self._db = self._connect()
            with suppress(psycopg.Error):
                self._db.execute("SELECT pg_terminate_backend($1)", (pid,))
        return self._db

    def run(self, sql: str, params: Params = ()) -> int:
        try:
            return self._usable().execute(_sql(sql), params).rowcount
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        try:
            return self._usable().execute(_sql(sql), params).fetchall()
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        try:
            with self._usable().cursor() as cur:
                cur.executemany(_sql(sql), rows)
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def commit(self, batch: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
        if len(batch) == 1:  # a statement alone is its own transaction (autocommit)
            ((sql, params),) = batch
            return [self.fetch(sql, params)]
        # Up to the pipeline's Sync the statements are one implicit transaction: one commit,
        # one round trip, and the server skips the rest (and rolls back) once one fails.
        return self._commit_on(self._db, batch)

    def _commit_on(
        self, db: psycopg.Connection[Any], batch: Sequence[Statement]
    ) -> list[list[tuple[Any, ...]]]:
        try:
            with db.pipeline():
                cursors = [db.execute(_sql(sql), params) for sql, params in batch]
            return [cursor.fetchall() if cursor.description else [] for cursor in cursors]
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def send_commit(self, batch: Sequence[Statement]) -> Landing:
        # On a connection of its own, so the run's other statements (claims, renewals) need
        # not wait for a reply in flight; its statements touch only rows this worker holds.
        lane = self._lane("journal")
        if len(batch) > 1:  # a row twice in one batch (rare): in one pipeline, waited for
            return Landing(rows=self._commit_on(lane.conn, batch))
        ((sql, params),) = batch
        return self._send_on(lane, sql, params)

    def send_fetch(self, sql: str, params: Params = ()) -> Landing:
        # Not on the journal's connection: a claim sent while a commit is on its way (or the
        # other way round) would have to wait for it, libpq taking one statement at a time.
        return self._send_on(self._lane("claims"), sql, params)

    def _lane(self, kind: str) -> Lane:
        if self._db.closed:  # closed under the run: no new connection behind its back
            raise self._fault(psycopg.OperationalError("the connection is closed"))
        lane = self._lanes.get(kind)
        if lane is None:
            lane = self._lanes[kind] = Lane(self._connect())
        return lane

    def _send_on(self, lane: Lane, sql: str, params: Params) -> Landing:
        try:
            return Sent(lane, lane.prepared(_sql(sql)), params, self._fault)
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def lock_at_once(self, sql: str, params: Params = ()) -> bool:
        try:
            with self._db.transaction():  # a savepoint: a refusal undoes only itself
                self._db.execute(_sql(sql), params)
        except pg.LockNotAvailable:
            return False
        except psycopg.Error as exc:
            raise self._fault(exc) from exc
        return True

    def try_lock(self, key: int) -> bool:
        (taken,) = self.fetch("SELECT pg_try_advisory_lock(?)", (key,))[0]
        return bool(taken)

    def unlock(self, key: int) -> None:
        self.run("SELECT pg_advisory_unlock(?)", (key,))

    def _begin(self) -> AbstractContextManager[None]:
        return self._locked(WRITE_LOCK)

    def _migration_lock(self) -> AbstractContextManager[None]:
        return self._locked(MIGRATION_LOCK)

    @contextmanager
    def _locked(self, key: int) -> Iterator[None]:
        """A transaction holding the advisory lock `key` from its start."""
        try:
            with self._db.transaction():
                self.run("SELECT pg_advisory_xact_lock(?)", (key,))
                yield
        except psycopg.Error as exc:  # BEGIN, COMMIT or the rollback: the block's are mapped
            raise self._fault(exc) from exc

    def _fault(self, exc: psycopg.Error) -> DatabaseError:
        """The DatabaseError that names what `exc` means for the delivery log, and the fix."""
        where, detail = self.display, scrub(_first_line(exc), self.target)
        retry = "re-run the same command to resume."
        if isinstance(exc, pg.DiskFull):
            return DatabaseError(
                f"{where}: the database server's disk is full ({detail})",
                hint=f"Free space on the database server, then {retry}",
            )
        if isinstance(exc, pg.ReadOnlySqlTransaction):
            return DatabaseError(
                f"{where}: the outbox database is read-only ({detail})",
                hint=f"Point [outbox] url at the primary server (not a standby), then {retry}",
            )
        if isinstance(exc, pg.InsufficientPrivilege):
            return DatabaseError(
                f"{where}: the database user may not use the outbox tables ({detail})",
                hint="The database user needs the right to create tables in its schema and to"
                f" read and write them: grant it, then {retry}",
            )
        if isinstance(exc, pg.DataCorrupted | pg.IndexCorrupted):
            return DatabaseError(
                f"{where}: the outbox database reports damaged data ({detail})",
                hint="Have the database repaired (REINDEX, or a restore) and check `newsletter"
                " status` before sending: rows the damage lost would be sent again.",
            )
        if isinstance(exc, pg.TransactionRollback):  # a deadlock, a serialization failure
            return DatabaseError(
                f"{where}: the outbox database ended a transaction that waited on another"
                f" ({detail})",
                hint=f"Another program holds rows of this send: {retry}",
            )
        if isinstance(exc, pg.QueryCanceled | pg.LockNotAvailable):
            return DatabaseError(
                f"{where}: the outbox database cancelled a statement ({detail})",
                hint="A statement_timeout or lock_timeout of the server, or an administrator's"
                f" pg_cancel_backend: {retry}",
            )
        broken = self._db.broken or any(lane.conn.broken for lane in self._lanes.values())
        if broken or isinstance(exc, psycopg.OperationalError):
            if self._farewell and self._farewell not in detail:
                detail = f"{scrub(self._farewell, self.target)}: {detail}"
            return DatabaseError(
                f"{where}: lost the connection to the outbox database ({detail})",
                hint="The server restarted, failed over or ended this session"
                f" (pg_terminate_backend): once it answers again, {retry}",
            )
        return DatabaseError(f"{where}: the outbox database failed: {detail}")

    def _script(self, migration: Migration) -> str:
        return migration.postgres


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
