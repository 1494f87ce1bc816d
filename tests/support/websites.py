"""Real HTTP and HTTPS servers on 127.0.0.1 (free ports) with one path per kind of link.

/ok 200 · /moved → /moved-again → /ok (two 301s) · /found → /ok (302) · /loop (redirects to itself)
/hop/N → /hop/N+1 (302, for ever, a new URL each time) · /to?url=URL → URL (302, anywhere)
/missing 404 · /broken 500 · /forbidden 403 · /slow (answers after SLOW seconds) · /dribble (its
header lines one byte every DRIP seconds, for DRIBBLE seconds, then it hangs up) · /no-head (HEAD
405, GET 200) · /unsubscribe 200 (serve's how-to page). `requests` counts every request served,
`most_busy` the most answered at once. Every answer closes its connection (HTTP/1.0).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from support import POLL

SLOW = 3.0
DRIP = 0.2
DRIBBLE = 20.0
_REDIRECTS = {
    "/moved": (301, "/moved-again"),
    "/moved-again": (301, "/ok"),
    "/found": (302, "/ok"),
    "/loop": (302, "/loop"),
}
_STATUS = {"/ok": 200, "/unsubscribe": 200, "/missing": 404, "/broken": 500, "/forbidden": 403}


@dataclass
class Site:
    base: str  # e.g. http://127.0.0.1:41234
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    busy: int = 0  # requests being answered right now
    most_busy: int = 0  # the most ever answered at once
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return self.base + path


class _Handler(BaseHTTPRequestHandler):
    site: Site
    other: int  # the status of a path not listed above

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        site = self.site
        with site.lock:
            site.busy += 1
            site.most_busy = max(site.most_busy, site.busy)
        self._counted = True
        try:
            self._reply(body=body)
        finally:
            self._release()

    def end_headers(self) -> None:
        # The request stops counting as busy before its answer can reach the client: released
        # after the write, a client that asks again at once is seen twice by this server.
        self._release()
        super().end_headers()

    def _release(self) -> None:
        if getattr(self, "_counted", False):
            self._counted = False
            with self.site.lock:
                self.site.busy -= 1

    def _reply(self, *, body: bool) -> None:
        path = self.path.split("?")[0]
        self.site.requests[(self.command, path)] += 1
        if path == "/slow":
            time.sleep(SLOW)
        if path == "/dribble":
            self._dribble()
            return
        redirect = _REDIRECTS.get(path)
        if path.startswith("/hop/"):
            redirect = (302, f"/hop/{int(path.removeprefix('/hop/')) + 1}")
        if path == "/to":
            redirect = (302, parse_qs(urlsplit(self.path).query)["url"][0])
        if redirect is not None:
            status, location = redirect
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status = _STATUS.get(path, 200 if path == "/slow" else self.other)
        if path == "/no-head":
            status = 405 if self.command == "HEAD" else 200
        payload = f"{status} {path}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _dribble(self) -> None:
        """A status line and header lines that never end, a byte at a time: every read gets
        a byte well within any read timeout."""
        lines = b"HTTP/1.1 200 OK\r\n" + b"X-Drip: 1\r\n" * 1000
        stop = time.monotonic() + DRIBBLE
        try:
            for byte in lines:
                if time.monotonic() > stop:
                    break
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(DRIP)
        except OSError:
            pass  # the checker hung up: what the test wants
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def website(
    tls: ssl.SSLContext | None = None, *, other: int = 404, host: str = "127.0.0.1", port: int = 0
) -> Iterator[Site]:
    """One server (HTTPS when `tls` is given) on `host` (any 127.x.y.z address is this machine)
    and `port` (0: a free one) until the block ends; `other`: the status of any path not listed
    above."""
    # A class per server: its site and `other` are the handler's class attributes.
    handler: type[_Handler] = type("Handler", (_Handler,), {"other": other})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    site = Site(f"{scheme}://{host}:{server.server_address[1]}")
    handler.site = site
    thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
