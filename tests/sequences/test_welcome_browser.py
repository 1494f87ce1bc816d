"""Done when, in a real browser: a visitor signs up in headless Chromium (the page's script
solves the challenge), confirms by the mail's link in the browser, and gets step 1 at once and
step 2 after its delay from a real `newsletter worker`, each once; after a one-click
unsubscribe from step 2's header, no further step (a second reader, who stays, gets it).

Playwright drives the system's Chromium; without it the test skips, except in CI (CI=true).
"""

from __future__ import annotations

import email
import email.policy
import mailbox as maildir
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from newsletter.database import open_database
from support.capture import capture_server
from support.sendcli import HANG, environment
from support.sequences import confirmed, welcome, write_step
from support.signups import SIGNUP_ENV
from support.site import SECRET, running_service

pytestmark = [pytest.mark.browser, pytest.mark.slow]
READER, OTHER = "ann+news@example.org", "bob@example.org"


def _mail(project: Path, address: str) -> list[EmailMessage]:
    box = maildir.Maildir(project / ".newsletter" / "mailbox", create=True)
    found = []
    for key in box.iterkeys():
        parsed = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        if address in str(parsed["To"]):
            found.append(parsed)
    return found


def _subjects(project: Path, address: str) -> list[str]:
    return sorted(str(m["Subject"]) for m in _mail(project, address))


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + HANG  # a hang guard, never a measure
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _worker(project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "newsletter", "worker"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=HANG)
    assert worker.returncode == 0, err


def test_a_visitor_signs_up_in_the_browser_and_gets_the_welcome_steps(
    browser: Any, project: Path
) -> None:
    welcome(project, second="1s")
    write_step(project, "welcome", "03-more", after="1w", title="More")  # brought forward below
    site_env = {**SIGNUP_ENV, "NEWSLETTER_SCHEDULE__QUIET_HOURS": ""}
    with capture_server(project) as port, running_service(project, **site_env) as site:
        env = {
            **environment(port),
            **site.env,
            "NEWSLETTER_SECRET": SECRET,
            "NEWSLETTER_WORKER__POLL": "0.05",
        }
        with open_database(site.settings.database_target) as database:
            database.enrolments.join("main", confirmed(database, OTHER), ["welcome"], time.time())
        worker = _worker(project, env)
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(f"{site.url}/signup")
            page.fill("#email", READER)
            page.locator("#subscribe:enabled").wait_for(timeout=60_000)  # the work is done
            with page.expect_navigation():
                page.click("#subscribe")
            _until(lambda: bool(_mail(project, READER)))
            (confirmation,) = _mail(project, READER)
            text = confirmation.get_body(("plain",)).get_content()  # type: ignore[union-attr]
            (link,) = set(re.findall(r"https?://[^\s<>\"]+/confirm/[A-Za-z0-9_.-]+", text))
            page.goto(link)  # the reader's click: the page confirms itself
            page.locator("#joined").wait_for(timeout=60_000)
            _until(lambda: {"Hello", "Tips"} <= set(_subjects(project, READER)))
        finally:
            context.close()
            _stop(worker)
        (tips,) = [m for m in _mail(project, READER) if m["Subject"] == "Tips"]
        one_click = re.findall(r"<(http[^>]+)>", str(tips["List-Unsubscribe"]))[0]
        assert httpx.post(one_click, data={"List-Unsubscribe": "One-Click"}).is_success
        write_step(project, "welcome", "03-more", after="0s", title="More")
        worker = _worker(project, env)
        try:
            _until(lambda: "More" in _subjects(project, OTHER))
        finally:
            _stop(worker)
    steps = [s for s in _subjects(project, READER) if s in ("Hello", "Tips", "More")]
    assert steps == ["Hello", "Tips"]  # each once, and nothing after leaving
    assert [s for s in _subjects(project, OTHER)] == ["Hello", "More", "Tips"]
