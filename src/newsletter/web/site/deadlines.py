"""`newsletter serve`'s connections (and the preview's): uvicorn's HTTP/1.1 protocol (h11) in; the
same protocol out, with a deadline on every request and answer and a cap on the connections open
at once.

uvicorn bounds the idle time after an answer (`timeout_keep_alive`, reset by every byte that
arrives) and the size of a request head only while it is incomplete (h11's 16 KiB,
`h11_max_incomplete_event_size`: a 100 KB head in one write came in whole), but not the
time a request takes to arrive: a client that sends nothing, or one header byte every few
seconds, holds its connection for ever. Its `limit_concurrency` counts those connections too, so
a few hundred idle ones make it answer 503 to everyone. Hence, per connection:

- the head of a request must have arrived `timeout` seconds after the connection opened (or the
  previous answer left), else the connection is closed (with a 408 if part of a head came);
- its body `timeout` seconds after the head: Guard answers 408 to a route still reading it, and a
  body nobody reads (sent to a route that answered without it) counts as waiting for the next head.
  Past the deadline and a grace second the connection is closed, whoever holds it;
- a request head over MAX_HEAD (16 KiB), in one write or in many, is answered 431 and the
  connection closed, before h11 parses it;
- an answer must be taken: once the socket's buffer is full and the transport holds more
  (`pause_writing`), the client has `timeout` seconds to read it down (`resume_writing`), else
  the connection is aborted. A client that pipelines requests and never reads their answers
  would otherwise hold its connection for ever, the app waiting to write (ten of them kept
  every other client on 503). New requests in the pipe do not restart that deadline: it runs
  from the pause, and only reading ends it. A connection closed with an answer still buffered
  (ours or uvicorn's `connection: close`) gets the same `timeout` to let it leave.
- at most `max_connections` are open: one more closes the connection that has waited longest for
  a request head (idle, or dribbling one), so a flood of idle connections cannot lock out a
  client that sends its request at once; when every one is busy with a request, the newcomer is
  answered 503 and closed.

The app's own work (an outbox statement) is not timed: it is not the client's doing.
"""

from __future__ import annotations

import asyncio
import logging
import re
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# Seconds past the body deadline before the connection is closed: Guard answers 408 at the
# deadline itself, and that answer should win the race.
GRACE = 1.0
# Descriptors kept beside the connections: the listening socket, the outbox, logs, templates.
RESERVE = 64
TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
HEAD_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)
BUSY_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\n"
    b"connection: close\r\n\r\n"
)

# The most a request head may take, its request line and blank line included (the manual's 16 KiB).
MAX_HEAD = 16 * 1024
# Where h11 sees a head end (h11/_receivebuffer.py: a bare LF is taken as a line end too).
_HEAD_END = re.compile(b"\n\r?\n")

error_log = logging.getLogger("newsletter.serve")


class DeadlineProtocol(H11Protocol):
    """H11Protocol, each request held to a deadline, the open connections to a cap (the class
    attributes: `deadline_protocol` sets them)."""

    timeout = 10.0
    max_connections = 1000
    _warned_at = -3600.0  # the last "cap reached" warning, for all connections: one a minute

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        # When the connection began to wait for a request head; None while a request is in.
        self.waiting_since: float | None = None
        self._partial = False  # bytes of a head came since then
        # Runs while an answer waits for the client to read it (see the module docstring).
        self._write_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._wait_for_head()
        if len(self.connections) > self.max_connections and not self._make_room():
            self._warn("every connection is busy with a request: refusing a new one (503)")
            transport.write(BUSY_503)
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_write_deadline()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.timeout, self._abort)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_write_deadline()
        # Read down to the low mark: progress. A closing connection still has the rest to let
        # go, and a fresh deadline for it.
        self._hold_flush()

    def timeout_keep_alive_handler(self) -> None:
        super().timeout_keep_alive_handler()
        self._hold_flush()

    def data_received(self, data: bytes) -> None:
        if self.waiting_since is not None:
            self._partial = True
        super().data_received(data)

    def handle_events(self) -> None:
        if self.conn.their_state is h11.IDLE and self._head_too_large():
            self.transport.write(HEAD_431)
            self._close()
            return
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request head arrived: its body's deadline now
            self.waiting_since = None
            self._arm(self.timeout + GRACE)
        if self.waiting_since is None and self.conn.their_state is not h11.SEND_BODY:
            self._disarm()  # the request is in: the rest is the app's time, not the client's
        self._hold_flush()  # uvicorn's 400 for a malformed request closes the transport

    def on_response_complete(self) -> None:
        answered = self.cycle
        super().on_response_complete()  # may start a pipelined request (handle_events)
        if self.transport.is_closing():
            self._hold_flush()  # an answer with `connection: close`
        elif self.cycle is answered:
            self._wait_for_head()

    def _head_too_large(self) -> bool:
        """Whether the next request head, as far as it came, is over MAX_HEAD. h11's own bound
        (max_incomplete_event_size) holds only while the head is incomplete: a 100 KB head in
        one write came in whole. Checked before h11 parses it, in one write or in many."""
        buffered = self.conn.trailing_data[0]
        # More than MAX_HEAD bytes in (the head, perhaps pipelined requests after it): the
        # head must end within the first MAX_HEAD.
        return len(buffered) > MAX_HEAD and _HEAD_END.search(buffered, 0, MAX_HEAD) is None

    def _wait_for_head(self) -> None:
        self.waiting_since = time.monotonic()
        self._partial = False
        self._arm(self.timeout)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.waiting_since is not None and self._partial:
            self.transport.write(TIMEOUT_408)
        self._close()

    def _close(self) -> None:
        self.transport.close()
        self._hold_flush()

    def _hold_flush(self) -> None:
        """A closing transport waits for its buffer to drain before the connection ends (and
        leaves the count): a client that does not read gets `timeout` seconds, then the abort."""
        if (
            self.transport.is_closing()
            and self.transport.get_write_buffer_size()
            and self._write_timer is None
        ):
            self._write_timer = self.loop.call_later(self.timeout, self._abort)

    def _stop_write_deadline(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _abort(self) -> None:
        """The client did not take its answer in time: the connection goes, buffer and all."""
        self._write_timer = None
        self._disarm()
        self.transport.abort()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request head; False if none
        waits (this one excepted)."""
        waiting = {
            c: c.waiting_since
            for c in self.connections
            if isinstance(c, DeadlineProtocol)
            and c is not self
            and c.waiting_since is not None
            and not c.transport.is_closing()
        }
        if not waiting:
            return False
        oldest = min(waiting, key=waiting.__getitem__)
        self._warn("closing the connection that waited longest for a request")
        oldest._disarm()
        if oldest.transport.get_write_buffer_size():
            oldest._abort()  # its last answer still unread: no room is made by waiting for it
        else:
            oldest.transport.close()
        return True

    def _warn(self, what: str) -> None:
        now = time.monotonic()
        if now - DeadlineProtocol._warned_at >= 60:
            DeadlineProtocol._warned_at = now
            error_log.warning(
                "%d connections open, the most [serve] max_connections allows: %s"
                " (more such lines within a minute are not written)",
                self.max_connections,
                what,
            )


def deadline_protocol(timeout: float, max_connections: int) -> type[DeadlineProtocol]:
    """The protocol class uvicorn is given (`http=`), with these limits."""
    attributes = {"timeout": timeout, "max_connections": max_connections}
    return type("DeadlineProtocol", (DeadlineProtocol,), attributes)


def fit_descriptors(max_connections: int) -> int:
    """How many connections this process can hold open: the soft limit on open files is raised
    toward the hard one when `max_connections` needs it (systemd's default soft limit is 1,024);
    past the hard one, fewer (the accept loop of a process out of descriptors stalls)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + RESERVE
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, soft - RESERVE))
