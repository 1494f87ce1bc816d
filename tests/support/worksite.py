"""A page with a signup form, our proof-of-work script and fresh challenges, served on
127.0.0.1 (a secure context, as WebCrypto needs) under a strict Content-Security-Policy: for the
browser tests of the proof of work and benchmarks/signup.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from newsletter.signup.challenge import ProofOfWork
from support import POLL

SCRIPT = (
    Path(__file__).resolve().parents[2]
    / "src"
    / "newsletter"
    / "web"
    / "site"
    / "static"
    / "proof-of-work.js"
)
CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; form-action 'self'"
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>signup</title>
<script src="/proof-of-work.js" defer></script></head><body>
<form method="post" action="/signup" data-challenge="/challenge">
<input type="email" name="email" value="ann@example.org">
<input type="hidden" name="altcha">
<p data-work-status hidden>This form needs JavaScript to prove you are not a bot.</p>
<button type="submit">Subscribe</button>
</form></body></html>"""


@contextmanager
def site(pow_: ProofOfWork) -> Iterator[str]:
    """The test page, the script and fresh challenges on 127.0.0.1 (a secure context)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/":
                body, kind = PAGE.encode(), "text/html; charset=utf-8"
            elif self.path == "/proof-of-work.js":
                body, kind = SCRIPT.read_bytes(), "text/javascript"
            elif self.path == "/challenge":
                body, kind = json.dumps(pow_.challenge()).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
