"""`newsletter serve --local` as the newcomer of issue 41 runs it: a project made by `init` with
an https base_url (the public host, not up yet), the generated `# signup = true` uncommented,
the capture server, and real headless Chromium on the local serve. The confirmation arrives at
the capture server with every link on the local address, and following it confirms: the whole
reader flow on one machine, with no `newsletter worker` and no workaround."""

from __future__ import annotations

import email
import email.policy
import mailbox as maildir
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import lxml.html
import pytest

from newsletter.config.settings import load_settings
from newsletter.database.roster import Status
from support.capture import capture_server
from support.newcomer import init_project, open_signup, running_serve
from support.signups import member

pytestmark = [pytest.mark.browser, pytest.mark.slow]

READER = "ann@example.org"
PUBLIC = "https://news.example.org"
# A cheap proof of work and no DNS lookup of the reader's domain (this machine has no network).
FAST = {"NEWSLETTER_SIGNUP__WORK_COST": "100", "NEWSLETTER_SIGNUP__CHECK_DNS": "false"}


def _mail_to(project: Path, address: str) -> EmailMessage:
    """The one message the capture server stored for `address`, once it has."""
    while True:  # pytest-timeout ends a wait for a mail that never comes
        box = maildir.Maildir(project / ".newsletter" / "mailbox", create=True)
        for key in box.iterkeys():
            parsed = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
            assert isinstance(parsed, EmailMessage)
            if address in str(parsed["To"]):
                return parsed
        time.sleep(0.05)


def test_serve_local_takes_a_signup_in_chromium_and_its_mailed_link_confirms_it(
    browser: Any, tmp_path: Path
) -> None:
    project = init_project(tmp_path, "--base-url", PUBLIC)
    open_signup(project)
    with (
        capture_server(project) as port,
        running_serve(project, "--local", NEWSLETTER_SMTP__PORT=str(port), **FAST) as served,
    ):
        local = served.url
        assert urlsplit(local).hostname == "127.0.0.1"
        assert served.lines[1] == (
            f"Signup (main) at {local}/signup; this process sends the confirmations"
        )
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(f"{local}/signup")
            page.fill("#email", READER)
            page.locator("#subscribe:enabled").wait_for(timeout=60_000)  # the work is done
            with page.expect_navigation():
                page.click("#subscribe")
            page.locator("#sent").wait_for()

            mail = _mail_to(project, READER)
            html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
            hrefs = [a.get("href") for a in lxml.html.fromstring(html).iter("a")]
            links = [h for h in hrefs if h and h.startswith("http")]
            assert links, hrefs
            # Every link on the local serve, none on the public host that is not up yet.
            assert all(link.startswith(f"{local}/") for link in links), links
            assert f"<{local}/unsubscribe/" in str(mail["List-Unsubscribe"])
            (confirm,) = {link for link in links if "/confirm/" in link}
            settings = load_settings(project / "newsletter.toml", environ={})
            assert member(settings.database_target, READER).status is Status.PENDING  # type: ignore[union-attr]

            page.goto(confirm)  # the reader's click: the page confirms itself
            page.locator("#joined").wait_for(timeout=10_000)
            assert member(settings.database_target, READER).status is Status.CONFIRMED  # type: ignore[union-attr]
        finally:
            context.close()
        code, out, err = served.stop()
    assert code == 0, err
    assert f"confirm to {READER}: sent" in out
