"""PostgreSQL statements sent without waiting for their reply: a connection of its own and a
statement in, a Landing out (postgres.py's journal commits and a send's claims).

A Lane is a connection kept for such statements and the statements prepared on it (parsed and
planned once, not at every send). A Sent statement goes out through libpq's own non-blocking
calls (psycopg's would wait for the reply); the event loop watches its socket (`fileno`) and
reads the reply as it comes. One statement is on its way per lane at a time.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg import pq
from psycopg.adapt import Transformer

from newsletter.database.backend import Landing, Params
from newsletter.errors import DatabaseError


class Lane:
    """A connection for statements sent without waiting for their reply, the statements
    prepared on it, and what turns their text results into Python values."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.statements: dict[str, bytes] = {}
        self.loader = Transformer(conn)

    def prepared(self, sql: str) -> bytes:
        """The name of `sql` (numbered placeholders) prepared on this connection; raises the
        psycopg error of a statement the server refuses."""
        name = self.statements.get(sql)
        if name is None:
            name = f"sent_{len(self.statements)}".encode()
            result = self.conn.pgconn.prepare(name, sql.encode())
            if result.status != pq.ExecStatus.COMMAND_OK:
                raise result_error(result)
            self.statements[sql] = name
        return name


class Sent(Landing):
    """One statement sent on a lane's connection, its reply read as it comes (libpq's own
    calls, non-blocking: psycopg's would wait for it). Its parameters go as text, each typed by
    the statement (a cast, or the column it is compared with); the rows it returns are loaded
    by their columns' types, as psycopg's own cursors load them."""

    def __init__(
        self,
        lane: Lane,
        name: bytes,
        params: Params,
        fault: Callable[[psycopg.Error], DatabaseError],
    ) -> None:
        """Sent; psycopg's errors (the caller maps them) until it is, `fault`'s after."""
        super().__init__()
        self.conn = conn = lane.conn.pgconn
        self.loader = lane.loader
        self.fault = fault
        self.fileno = conn.socket
        conn.nonblocking = 1
        conn.send_query_prepared(name, [None if v is None else str(v).encode() for v in params])
        if conn.flush():  # what the socket's buffer did not take at once
            with selectors.DefaultSelector() as selector:
                selector.register(self.fileno, selectors.EVENT_WRITE)
                while conn.flush():
                    selector.select()

    def ready(self) -> bool:
        if self._rows is not None:
            return True
        try:
            self.conn.consume_input()
            if self.conn.is_busy():
                return False
            self._rows = self._read()
        except psycopg.Error as exc:
            raise self.fault(exc) from exc
        return True

    def wait(self) -> list[list[tuple[Any, ...]]]:
        with selectors.DefaultSelector() as selector:
            selector.register(self.conn.socket, selectors.EVENT_READ)
            while not self.ready():
                selector.select()
        return self.rows

    def _read(self) -> list[list[tuple[Any, ...]]]:
        failed: psycopg.Error | None = None
        rows: list[tuple[Any, ...]] = []
        while (result := self.conn.get_result()) is not None:
            if result.status == pq.ExecStatus.TUPLES_OK:
                self.loader.set_pgresult(result)
                rows = self.loader.load_rows(0, result.ntuples, tuple)
            elif result.status != pq.ExecStatus.COMMAND_OK and failed is None:
                failed = result_error(result)
        if failed is not None:
            raise failed
        if self.conn.status != pq.ConnStatus.OK:
            raise psycopg.OperationalError("the connection to the server was lost")
        return [rows]


def result_error(result: pq.abc.PGresult) -> psycopg.Error:
    """The psycopg error a failed result stands for (its class named by its SQLSTATE)."""
    state = result.error_field(pq.DiagnosticField.SQLSTATE)
    try:
        kind = pg.lookup(state.decode()) if state else psycopg.DatabaseError
    except KeyError:
        kind = psycopg.DatabaseError
    return kind(result.error_message.decode(errors="replace").strip(), info=result)
