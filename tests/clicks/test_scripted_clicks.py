"""Issue 23's end to end, in both modes: `newsletter send` with tracking on into the capture
server, `newsletter serve`'s app on 127.0.0.1, then scripted clicks on loopback: a person in
headless Chromium on two items a few seconds apart, a scanner's HEAD sweep, a canary hit and a
gateway fetching every link of a message within a second. `newsletter report` then counts the
person's two items as people and everything else as machines, and no redirect went anywhere
the issue does not link.

Each actor comes through the proxy in front of `serve` (127.0.0.1, trusted by default) from an
address of its own, as on the internet. The browser's redirects to the issue's sites go to a
proxy on a closed loopback port: nothing leaves the machine.
"""

from __future__ import annotations

import csv
import email
import email.policy
import io
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from newsletter.database import open_database
from newsletter.issues import load_issue
from newsletter.links import issue_url
from newsletter.mail.clicktokens import verify_click
from newsletter.rendering.places import CANARY, Place, Region, issue_links
from support.capture import capture_server
from support.sendcli import environment
from support.site import SECRET, running_service
from support.tracked import CLICK, Sent

CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
# Chromium, a real send and `serve`, and seconds between the clicks: a minute in all.
pytestmark = [pytest.mark.browser, pytest.mark.slow]

PERSON, SCANNER, CANARY_HIT, GATEWAY = (
    "li.lei@example.com",
    "alice@example.net",
    ("han.meimei@example.org"),
    "bob@example.net",
)
# Short windows, so the test waits seconds: a click more than a second after its delivery is
# no longer "at delivery"; two clicks 2 s apart are no burst.
WINDOWS = {
    "NEWSLETTER_TRACKING__DELIVERY_WINDOW": "1",
    "NEWSLETTER_TRACKING__CANARY_WINDOW": "2",
    "NEWSLETTER_TRACKING__BURST_WINDOW": "1",
    "NEWSLETTER_PRIVACY__MIN_COUNT": "1",
}


def received(project: Path) -> dict[str, Sent]:
    """Each captured message by its recipient."""
    found = {}
    for path in (project / ".newsletter" / "mailbox" / "new").iterdir():
        data = path.read_bytes()
        message = email.message_from_bytes(data, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        found[str(message["To"].addresses[0].addr_spec)] = Sent(str(message["To"]), 0, data)
    return found


def place_of(href: str) -> Place:
    match = CLICK.search(href)
    assert match is not None
    return verify_click(SECRET, match.group(1)).place


@pytest.mark.parametrize("mode", ["aggregate", "per-reader"])
def test_a_person_two_items_and_every_machine_told_apart(
    project: Path, browser: Any, mode: str
) -> None:
    settings_env = {"NEWSLETTER_TRACKING__CLICKS": mode, **WINDOWS}
    with running_service(project, **settings_env) as service, capture_server(project) as port:
        env = environment(
            port,
            NEWSLETTER_SECRET=SECRET,
            NEWSLETTER_NEWSLETTER__BASE_URL=service.url,
            **settings_env,
        )
        # --force: the links point at this test's loopback serve, which a real send refuses.
        done = subprocess.run(
            [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--yes", "--force"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        mail = received(project)
        assert {PERSON, SCANNER, CANARY_HIT, GATEWAY} <= set(mail)
        issue = load_issue(service.settings.issues_dir, 14)
        # The send recorded the links its messages carry, before the first one went out.
        with open_database(service.settings.database_target) as database:
            recorded = database.sent_links.links(14, "main")
            assert database.sent_links.mode(14, "main") == mode
        assert recorded is not None
        assert {place: url for place, url in recorded.items() if place != CANARY} == {
            link.place: link.url for link in issue_links(issue) if link.url.startswith("http")
        }
        allowed = {link.url for link in issue_links(issue)} | {issue_url(service.url, 14)}
        locations: list[str] = []
        time.sleep(1.2)  # past the delivery window

        # A person opens the message and reads two items of different sections.
        person = mail[PERSON]
        titles = [h for h in person.tracked() if place_of(h).region is Region.TITLE]
        first = titles[0]
        second = next(h for h in titles if place_of(h).section != place_of(first).section)
        context = browser.new_context(
            user_agent=CHROME,
            extra_http_headers={"X-Forwarded-For": "198.51.100.7"},
            # The issue's sites through a closed port: nothing leaves the machine.
            proxy={"server": "http://127.0.0.1:9", "bypass": "127.0.0.1"},
        )
        try:
            context.on(
                "response",
                lambda r: locations.append(r.headers["location"]) if "/r/" in r.url else None,
            )
            for href in (first, second):
                page = context.new_page()
                page.set_content(person.parts()[0])
                with page.expect_response(lambda r, h=href: r.url == h):
                    page.locator(f'a[href="{href}"]').first.click(no_wait_after=True)
                page.close()
                time.sleep(2.2)  # the next item a while later: no burst, out of its window
        finally:
            context.close()

        with httpx.Client(follow_redirects=False, timeout=10) as client:

            def fetch(method: str, href: str, agent: str, address: str) -> None:
                answer = client.request(
                    method, href, headers={"User-Agent": agent, "X-Forwarded-For": address}
                )
                assert answer.status_code == 302
                locations.append(answer.headers["location"])

            # A scanner checks every link of its message with HEAD.
            for href in mail[SCANNER].tracked():
                fetch("HEAD", href, "Mozilla/5.0 (compatible; LinkScanner)", "203.0.113.9")
            time.sleep(2.2)
            # Something follows the hidden canary of another message, and nothing else.
            canary = next(h for h in mail[CANARY_HIT].tracked() if place_of(h) == CANARY)
            fetch("GET", canary, CHROME, "192.0.2.44")
            time.sleep(2.2)
            # A gateway fetches every link of a message within a second, as a browser would.
            for href in mail[GATEWAY].tracked():
                fetch("GET", href, CHROME, "40.94.0.10")
        links = len(mail[GATEWAY].tracked())
        expected_events = 2 + links + 1 + links
        deadline = time.monotonic() + 10
        while True:
            with open_database(service.settings.database_target) as database:
                if database.clicks.count(14, "main") >= expected_events:
                    break
            assert time.monotonic() < deadline, "the events were not all written"
            time.sleep(0.05)

    # No redirect went anywhere the issue does not link.
    assert len(locations) == expected_events
    assert set(locations) <= allowed

    report = subprocess.run(
        [sys.executable, "-m", "newsletter", "report", "--issue", "14", "--csv", "-"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr
    rows = list(csv.DictReader(io.StringIO(report.stdout)))
    items = {(r["section"], r["item"]): r for r in rows if r["kind"] == "item"}
    chosen = {(str(place_of(h).section + 1), str(place_of(h).item + 1)) for h in (first, second)}
    people = {key: int(row["people"]) for key, row in items.items()}
    assert {key for key, n in people.items() if n} == chosen
    assert all(people[key] == 1 for key in chosen)
    (total,) = [r for r in rows if r["kind"] == "issue"]
    # People: one reader (per-reader) or two requests (aggregate); machines: all the rest.
    assert int(total["people"]) == (1 if mode == "per-reader" else 2)
    assert int(total["machines"]) == expected_events - 2
    rules = {r["title"]: int(r["machines"]) for r in rows if r["kind"] == "rule"}
    assert rules["method"] == links
    assert rules["canary"] == 2  # the canary hit, and the gateway's fetch of its own canary
    assert rules["near-canary"] + rules["burst"] == links - 1
    text = subprocess.run(
        [sys.executable, "-m", "newsletter", "report", "--issue", "14"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert text.returncode == 0, text.stderr
    assert "Machine requests by rule" in text.stdout
