"""The whole signup in real headless Chromium: the page's script solves the challenge, the form
goes in, `newsletter worker` (a real process) sends the confirmation into the capture server,
a link scanner's GET of its link confirms nothing, the reader's click does (the page submits
itself), and the next `newsletter send` includes the address.

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
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from newsletter.database.roster import Status
from support.capture import capture_server
from support.sendcli import environment
from support.signups import SIGNUP_ENV, member
from support.site import SECRET, running_service

pytestmark = [pytest.mark.browser, pytest.mark.slow]

READER = "ann+news@example.org"


def _mail_to(project: Path, address: str, timeout: float = 30.0) -> list[EmailMessage]:
    """The messages the capture server stored for `address` so far (waiting for one)."""
    deadline = time.monotonic() + timeout
    while True:
        box = maildir.Maildir(project / ".newsletter" / "mailbox", create=True)
        found = []
        for key in box.iterkeys():
            parsed = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
            assert isinstance(parsed, EmailMessage)
            if address in str(parsed["To"]):
                found.append(parsed)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_visitor_signs_up_confirms_in_the_browser_and_gets_the_next_issue(
    browser: Any, project: Path
) -> None:
    with capture_server(project) as port, running_service(project, **SIGNUP_ENV) as site:
        env = {
            **environment(port),
            **SIGNUP_ENV,
            "NEWSLETTER_SECRET": SECRET,
            "NEWSLETTER_NEWSLETTER__BASE_URL": site.url,
            "NEWSLETTER_WORKER__POLL": "0.05",
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "newsletter", "worker"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        context = browser.new_context()
        page = context.new_page()
        problems: list[str] = []
        hosts: set[str] = set()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("request", lambda r: hosts.add(urlsplit(r.url).netloc))
        try:
            page.goto(f"{site.url}/")
            page.click("#subscribe-link")  # the archive links the signup page
            page.fill("#email", READER)
            page.locator("#subscribe:enabled").wait_for(timeout=60_000)  # the work is done
            with page.expect_navigation():
                page.click("#subscribe")
            assert page.locator("#sent").inner_text() == "请查收确认邮件"
            assert member(site.settings.database_target, READER).status is Status.PENDING  # type: ignore[union-attr]

            (mail,) = _mail_to(project, READER)
            assert mail["Subject"] == "请确认订阅AI系统内容推荐"
            assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
            text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
            html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
            assert "news" not in text.replace("news.example", "")  # nothing the visitor typed
            assert READER not in html
            (link,) = set(re.findall(r"https?://[^\s<>\"]+/confirm/[A-Za-z0-9_.-]+", text + html))

            scanned = httpx.get(link)  # a link scanner opens it first
            assert scanned.status_code == 200
            assert member(site.settings.database_target, READER).status is Status.PENDING  # type: ignore[union-attr]

            page.goto(link)  # the reader's click: the page confirms itself
            page.locator("#joined").wait_for(timeout=10_000)
            assert member(site.settings.database_target, READER).status is Status.CONFIRMED  # type: ignore[union-attr]
            assert problems == []  # the strict CSP let our scripts run, and nothing else
            assert hosts == {urlsplit(site.url).netloc}  # no third party, no CDN
        finally:
            context.close()
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert ": confirm to ann+news@example.org: sent" in out

        # --force: the links point at this test's loopback serve, which a real send refuses.
        sent = subprocess.run(
            [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--yes", "--force"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sent.returncode == 0, sent.stderr
    issues = [m for m in _mail_to(project, READER) if "请确认" not in str(m["Subject"])]
    assert len(issues) == 1  # the next send included the address, once
