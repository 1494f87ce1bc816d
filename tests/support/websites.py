"""Real HTTP and HTTPS servers on 127.0.0.1 (free ports) with one path per kind of link.

/ok 200 · /moved → /moved-again → /ok (two 301s) · /found → /ok (302) · /loop (redirects forever)
/missing 404 · /broken 500 · /forbidden 403 · /slow (answers after SLOW seconds) · /no-head (HEAD
405, GET 200) · /unsubscribe 200 (serve's how-to page). `requests` counts every request served,
`most_busy` the most answered at once.
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

SLOW = 3.0
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
        try:
            self._reply(body=body)
        finally:
            with site.lock:
                site.busy -= 1

    def _reply(self, *, body: bool) -> None:
        path = self.path.split("?")[0]
        self.site.requests[(self.command, path)] += 1
        if path == "/slow":
            time.sleep(SLOW)
        if path in _REDIRECTS:
            status, location = _REDIRECTS[path]
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

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def website(tls: ssl.SSLContext | None = None, *, other: int = 404) -> Iterator[Site]:
    """One server (HTTPS when `tls` is given) until the block ends; `other`: the status of any
    path not listed above."""
    handler = type("Handler", (_Handler,), {"other": other})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    site = Site(f"{scheme}://127.0.0.1:{server.server_address[1]}")
    handler.site = site
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
