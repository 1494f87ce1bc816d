"""The browser side of the proof of work, in real headless Chromium: our script
(web/site/static/proof-of-work.js) solves challenges the `altcha` package makes, under a strict
Content-Security-Policy, asking nothing of any host but ours; the payload it posts verifies.

Playwright drives the system's Chromium. Without it the test skips with the reason, except in CI
(CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from newsletter.signup.challenge import ProofOfWork, Verdict

pytestmark = pytest.mark.browser

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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_form_gets_a_payload_the_server_accepts_once(browser: Any) -> None:
    pow_ = ProofOfWork(b"browser-tests-secret-0123456789abcdef", cost=2000, expiry=600)
    with site(pow_) as url:
        context = browser.new_context()
        page = context.new_page()
        problems: list[str] = []
        hosts: set[str] = set()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc))
        try:
            page.goto(url)
            assert page.locator("button").is_disabled()  # no submit before the work is done
            page.wait_for_function(
                "document.querySelector('input[name=altcha]').value !== ''", timeout=60_000
            )
            assert page.locator("button").is_enabled()
            assert page.locator("[data-work-status]").is_hidden()
            payload = page.locator("input[name=altcha]").input_value()
            assert problems == []  # the strict CSP blocked nothing the script needs
            assert hosts == {urlsplit(url).netloc}  # no third party, no CDN
        finally:
            context.close()
    assert pow_.verify(payload).verdict is Verdict.ACCEPTED
    assert pow_.verify(payload).verdict is Verdict.REPLAYED


def test_the_script_finds_the_counter_altchas_own_solver_finds(browser: Any) -> None:
    """Interoperability both ways: for the same challenge our script and the altcha package's
    reference solver find the same (lowest) counter and key."""
    from altcha import Challenge, solve_challenge

    pow_ = ProofOfWork(b"browser-tests-secret-0123456789abcdef", cost=500, expiry=600)
    with site(pow_) as url:
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(url)
            for _ in range(3):
                made = pow_.challenge()
                ours = page.evaluate("(c) => window.NewsletterWork.solve(c)", made)
                reference = solve_challenge(Challenge.from_dict(made))
                assert reference is not None
                assert (ours["counter"], ours["derivedKey"]) == (
                    reference.counter,
                    reference.derived_key,
                )
        finally:
            context.close()


def test_without_a_challenge_the_form_says_why_and_stays_disabled(browser: Any) -> None:
    pow_ = ProofOfWork(b"browser-tests-secret-0123456789abcdef", cost=100, expiry=600)
    with site(pow_) as url:
        context = browser.new_context()
        page = context.new_page()
        try:
            page.route("**/challenge", lambda route: route.fulfill(status=503, body="busy"))
            page.goto(url)
            page.wait_for_selector("[data-work-status]", state="visible", timeout=10_000)
            assert page.locator("button").is_disabled()
            assert page.locator("input[name=altcha]").input_value() == ""
        finally:
            context.close()
