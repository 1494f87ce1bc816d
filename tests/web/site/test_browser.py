"""The unsubscribe pages in real headless Chromium: open the link from a message, click the one
button, see the done page; nothing is unsubscribed before the click.

Playwright drives the system's Chromium. Without it the test skips with the reason, except in CI
(CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from newsletter.database import open_database
from support.site import ALICE, one_click_url, running_service

pytestmark = pytest.mark.browser


def test_clicking_the_confirm_button_unsubscribes_and_shows_the_done_page(
    browser: Any, project: Path
) -> None:
    with running_service(project) as service:
        url = one_click_url(service.settings)
        context = browser.new_context()
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        try:
            opened = page.goto(url)
            assert opened is not None
            assert opened.status == 200
            assert page.locator("h1").inner_text() == "退订"
            assert page.locator("button").count() == 1
            with open_database(service.settings.database) as database:
                assert not database.suppressions.contains("main", ALICE)  # opening it did nothing

            with page.expect_navigation():
                page.click("#confirm")
            assert page.url == url  # no redirect: the done page is the POST's own answer
            assert page.locator("#done").inner_text() == "已退订"
            assert page.locator("#resubscribe").inner_text() == "重新订阅"
            with open_database(service.settings.database) as database:
                rows = database.suppressions.all("main")
            assert [(r.address, r.source) for r in rows] == [(ALICE, "web")]

            # The done page's re-subscribe button undoes it, again by POST with the token.
            with page.expect_navigation():
                page.click("#resubscribe")
            assert page.locator("#resubscribed").inner_text() == "已重新订阅"
            with open_database(service.settings.database) as database:
                assert database.suppressions.all("main") == []
            assert problems == []  # the strict CSP blocked nothing the pages need
        finally:
            context.close()
