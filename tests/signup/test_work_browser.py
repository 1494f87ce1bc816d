"""The browser side of the proof of work, in real headless Chromium: our script
(web/site/static/proof-of-work.js) solves challenges the `altcha` package makes, under a strict
Content-Security-Policy, asking nothing of any host but ours; the payload it posts verifies.

Playwright drives the system's Chromium. Without it the test skips with the reason, except in CI
(CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from newsletter.signup.challenge import ProofOfWork, ProofVerdict
from support.worksite import site

pytestmark = pytest.mark.browser


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
        held: list[Any] = []  # the challenge's request, held until the button was looked at
        page.route("**/challenge", lambda route: held.append(route))
        try:
            page.goto(url)
            page.locator("form[aria-busy=true]").wait_for()  # the script holds the form
            assert page.locator("button").is_disabled()  # no submit before the work is done
            while not held:
                page.wait_for_timeout(10)
            held[0].continue_()
            field = page.locator("input[name=altcha]")
            deadline = time.monotonic() + 60
            while not field.input_value() and time.monotonic() < deadline:
                page.wait_for_timeout(50)  # polled from here: the page's CSP forbids eval
            assert page.locator("button").is_enabled()
            assert page.locator("[data-work-status]").is_hidden()
            payload = page.locator("input[name=altcha]").input_value()
            assert problems == []  # the strict CSP blocked nothing the script needs
            assert hosts == {urlsplit(url).netloc}  # no third party, no CDN
        finally:
            context.close()
    assert pow_.verify(payload).verdict is ProofVerdict.ACCEPTED
    assert pow_.verify(payload).verdict is ProofVerdict.REPLAYED


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
