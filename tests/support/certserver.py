"""A slow way out for SES's webhook: a real HTTP server on 127.0.0.1 (a free port) standing in
for SNS, which holds every request until the test releases it and counts each one. `fetch` is
what the site is handed for the network (create_app's seam): it asks this server for the path
and query of the SNS URL it is given, so nothing leaves the machine.

Once released, SNS_CERT_URL's path gets `certificate` (503 if None), another path shaped as
SNS names its certificates 404 (SNS has no such one; 503 if `certificate` is None), anything
else (a SubscribeURL) 503.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from support import POLL
from support.hooks import SNS_CERT_URL

_CERTIFICATE = re.compile(r"/SimpleNotificationService-[0-9a-fA-F]+\.pem")
HOLD_AT_MOST = 60.0  # a test that never releases fails by its own assertion, not by hanging here


@dataclass
class HeldSns:
    base: str = ""
    certificate: bytes | None = None
    asked: list[str] = field(default_factory=list)  # every path?query requested, in order
    answered: int = 0  # requests answered (none while held)
    released: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def fetch(self, url: str) -> bytes:
        """The site's network: `url`'s path and query asked of this server."""
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        with urllib.request.urlopen(self.base + path, timeout=HOLD_AT_MOST * 2) as answer:
            data: bytes = answer.read(65536)
        return data

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> bool:
        """True once `count` requests have come (held or answered)."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.asked) >= count, timeout)

    def release(self) -> None:
        self.released.set()


class _Handler(BaseHTTPRequestHandler):
    sns: HeldSns

    def do_GET(self) -> None:
        with self.sns.changed:
            self.sns.asked.append(self.path)
            self.sns.changed.notify_all()
        self.sns.released.wait(HOLD_AT_MOST)
        with self.sns.changed:
            self.sns.answered += 1
        body = self.sns.certificate
        path = urlsplit(self.path).path
        if body is None or not _CERTIFICATE.fullmatch(path):
            self.send_error(503, "SNS is unavailable (a test's)")
            return
        if path != urlsplit(SNS_CERT_URL).path:
            self.send_error(404, "no such certificate (a test's SNS)")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-pem-file")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def held_sns(certificate: bytes | None = None, *, held: bool = True) -> Iterator[HeldSns]:
    """The server until the block ends (released at the end, whatever the test did)."""
    sns = HeldSns(certificate=certificate)
    if not held:
        sns.release()
    handler = type("Handler", (_Handler,), {"sns": sns})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    sns.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield sns
    finally:
        sns.release()
        server.shutdown()
        server.server_close()
        thread.join(10)
