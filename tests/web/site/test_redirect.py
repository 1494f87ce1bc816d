"""`newsletter serve`'s /r/TOKEN over real HTTP on 127.0.0.1, on both backends: every tracked link
of a sent message redirects to the link the message had at that place and is kept as an event;
a forged, altered or foreign token redirects nowhere; an old token works after a rotation; the
event's fields follow [tracking] and [privacy]; a failure to keep it never costs the redirect."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from newsletter.config.settings import Settings, load_settings
from newsletter.database import open_database
from newsletter.database.clicks import ClickRecord
from newsletter.issues import load_issue
from newsletter.mail.clicktokens import click_token, verify_click
from newsletter.mail.tokens import sign
from newsletter.mail.tracking import PROBE_ROW
from newsletter.rendering.places import CANARY, Place, Region, issue_links
from support.capture import capture_server
from support.sendcli import environment
from support.site import SECRET, RunningService, running_service, serve_process
from support.tracked import CLICK, Sent, tracked_send

READERS = ["ann@example.com", "bob@example.com"]
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


@pytest.fixture(params=["aggregate", "per-reader"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def service(project: Path, database_target: Path | str, mode: str) -> Iterator[RunningService]:
    env = {"NEWSLETTER_TRACKING__CLICKS": mode}
    if isinstance(database_target, str):
        env["NEWSLETTER_OUTBOX__URL"] = database_target
    with running_service(project, **env) as running:
        yield running


def events(settings: Settings, count: int, timeout: float = 5.0) -> list[ClickRecord]:
    """The send's events once `count` are written (the endpoint writes them in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        with open_database(settings.database_target) as database:
            found = list(database.clicks.events(14, "main"))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def token_of(href: str) -> str:
    match = CLICK.search(href)
    assert match is not None
    return match.group(1)


@pytest.mark.slow
def test_every_link_leads_where_the_message_linked_it(service: RunningService, mode: str) -> None:
    settings = service.settings
    sent = tracked_send(settings, READERS)
    issue = load_issue(settings.issues_dir, 14)
    by_place = {link.place: link.url for link in issue_links(issue)}
    ann = sent[0]
    links = ann.tracked()
    assert len(links) > 20
    with httpx.Client() as client:
        for href in links:
            assert href.startswith(service.url + "/r/")
            answer = client.get(href, headers={"User-Agent": FIREFOX}, follow_redirects=False)
            target = verify_click(SECRET, token_of(href))
            expected = by_place.get(target.place, f"{settings.newsletter.base_url}/issues/14")
            assert answer.status_code == 302
            assert answer.headers["location"] == expected
            assert answer.headers["cache-control"] == "no-store"
            assert answer.headers["referrer-policy"] == "no-referrer"
        head = client.head(links[1], follow_redirects=False)
        assert head.status_code == 302
    kept = events(settings, len(links) + 1)
    assert len(kept) == len(links) + 1
    assert kept[0].place == CANARY
    assert {e.method for e in kept} == {"GET", "HEAD"}
    assert {e.agent for e in kept if e.method == "GET"} == {"browser:firefox"}
    assert {e.ip for e in kept} == {"127.0.0.0/24"}
    if mode == "per-reader":
        assert {e.row for e in kept} == {ann.row}
        assert all(e.since_delivery is not None and 0 <= e.since_delivery < 60 for e in kept)
    else:
        assert {e.row for e in kept} == {None}
        assert {e.since_delivery for e in kept} == {None}
    # The access log names the route, never the token.
    paths = {record["path"] for record in service.access() if record["path"].startswith("/r/")}
    assert paths == {"/r/[token]"}


@pytest.mark.slow
def test_a_forged_or_altered_token_redirects_nowhere(service: RunningService) -> None:
    settings = service.settings
    href = tracked_send(settings, READERS)[0].tracked()[3]
    token = token_of(href)
    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    foreign = click_token("another-secret-0123456789abcdef", 14, Place(Region.TITLE), "x", row=1)
    wrong = [
        flipped,
        token[:-1],
        token + "A",
        foreign,
        sign(SECRET, "main", READERS[0]),  # an unsubscribe token is no click token
        "x" * 300,
        "../../etc/passwd",
    ]
    with httpx.Client(base_url=service.url) as client:
        for bad in wrong:
            answer = client.get(f"/r/{bad}", follow_redirects=False)
            assert answer.status_code == 404, bad
            assert "location" not in answer.headers
        # ... and a click token does not unsubscribe anyone.
        assert (
            client.post(f"/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"}).status_code
            == 403
        )
    assert events(settings, 1, timeout=0.5) == []


def test_old_tokens_keep_working_after_a_rotation(project: Path, mode: str) -> None:
    with running_service(project, NEWSLETTER_TRACKING__CLICKS=mode) as first:
        href = tracked_send(first.settings, READERS)[1].tracked()[5]
    rotated = {
        "NEWSLETTER_TRACKING__CLICKS": mode,
        "NEWSLETTER_SECRET_PREVIOUS": SECRET,
    }
    with running_service(
        project, **rotated, NEWSLETTER_SECRET="rotated-secret-0123456789abcdef"
    ) as second:
        path = href[href.index("/r/") :]
        answer = httpx.get(second.url + path, follow_redirects=False)
        assert answer.status_code == 302
        target = verify_click(SECRET, token_of(href))
        issue = load_issue(second.settings.issues_dir, 14)
        assert (
            answer.headers["location"]
            == {link.place: link.url for link in issue_links(issue)}[target.place]
        )
    with running_service(
        project,
        NEWSLETTER_TRACKING__CLICKS=mode,
        NEWSLETTER_SECRET="rotated-secret-0123456789abcdef",
    ) as third:
        assert httpx.get(third.url + path, follow_redirects=False).status_code == 404


def test_the_link_is_the_one_the_message_had_not_todays(service: RunningService, mode: str) -> None:
    settings = service.settings
    ann = tracked_send(settings, READERS)[0]
    issue = load_issue(settings.issues_dir, 14)
    first_item = next(k for k in issue_links(issue) if k.place.region is Region.TITLE)
    href = next(
        h for h in ann.tracked() if verify_click(SECRET, token_of(h)).place == first_item.place
    )
    # The editor changes that link in the file after the send.
    path = settings.issues_dir / "14.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace(first_item.url, "https://moved.example/"),
        encoding="utf-8",
    )
    answer = httpx.get(href, follow_redirects=False)
    assert answer.headers["location"] == first_item.url


def test_a_box_token_whose_place_holds_another_link_leads_to_the_web_version(
    service: RunningService,
) -> None:
    settings = service.settings
    place = Place(Region.TITLE, 0, 0)
    with open_database(settings.database_target) as database:
        database.sent_links.record(14, "main", "aggregate", [(place, "https://now.example/")])
    old = click_token(SECRET, 14, place, "https://before.example/", list_name="main")
    same = click_token(SECRET, 14, place, "https://now.example/", list_name="main")
    with httpx.Client(base_url=service.url) as client:
        assert (
            client.get(f"/r/{old}").headers["location"]
            == f"{settings.newsletter.base_url}/issues/14"
        )
        assert client.get(f"/r/{same}").headers["location"] == "https://now.example/"


@pytest.mark.slow
def test_no_reader_s_tokens_redirect_and_keep_nothing(service: RunningService) -> None:
    """Row 0: the sample message's and check --online's tokens; before any send the link is
    the issue file's."""
    settings = service.settings
    issue = load_issue(settings.issues_dir, 14)
    link = issue_links(issue)[4]
    token = click_token(SECRET, 14, link.place, link.url, row=PROBE_ROW)
    answer = httpx.get(f"{service.url}/r/{token}", follow_redirects=False)
    assert answer.headers["location"] == link.url
    assert events(settings, 1, timeout=0.5) == []


def test_a_failure_to_keep_the_event_never_costs_the_redirect(project: Path, mode: str) -> None:
    with running_service(project, NEWSLETTER_TRACKING__CLICKS=mode) as service:
        href = tracked_send(service.settings, READERS)[0].tracked()[2]
        target = service.settings.database_target
        assert isinstance(target, Path)
        db = sqlite3.connect(target)
        db.execute("DROP TABLE clicks")
        db.commit()
        db.close()
        for _ in range(3):
            answer = httpx.get(href, follow_redirects=False)
            assert answer.status_code == 302
            assert "/r/" not in answer.headers["location"]
        assert service.wait_for_log("click event(s) not kept")


@pytest.mark.slow
def test_tracking_turned_off_keeps_nothing_and_still_redirects(project: Path) -> None:
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="per-reader") as service:
        href = tracked_send(service.settings, READERS)[0].tracked()[2]
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="off") as service:
        path = href[href.index("/r/") :]
        assert httpx.get(service.url + path, follow_redirects=False).status_code == 302
        assert events(service.settings, 1, timeout=0.5) == []


@pytest.mark.slow
def test_tracking_turned_on_while_serve_runs_loses_no_click(project: Path) -> None:
    # issue 29: serve read [tracking] clicks = "off" at start; the editor turned it on in
    # newsletter.toml and sent; the messages' links led through serve's /r/, and every click
    # was dropped until serve restarted. The send's own record now says what to keep.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")},
        "NEWSLETTER_SECRET": SECRET,
    }
    with serve_process(project, env) as (base, serve):
        config = project / "newsletter.toml"
        assert "[tracking]" not in config.read_text(encoding="utf-8")  # off: the default
        with config.open("a", encoding="utf-8") as toml:
            toml.write('\n[tracking]\nclicks = "per-reader"\n')
        with capture_server(project) as port:
            sent = subprocess.run(
                [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--yes"],
                cwd=project,
                env=environment(port, NEWSLETTER_SECRET=SECRET),  # serve's
                capture_output=True,
                text=True,
                timeout=120,
            )
        assert sent.returncode == 0, sent.stderr
        message = next((project / ".newsletter" / "mailbox" / "new").iterdir()).read_bytes()
        href = Sent("", 0, message).tracked()[1]  # an item's link (the canary is first)
        answer = httpx.get(base + href[href.index("/r/") :], follow_redirects=False)
        assert answer.status_code == 302
        settings = load_settings(config, environ={})
        assert settings.tracking.clicks == "per-reader"
        (event,) = events(settings, 1, timeout=30)
        assert event.row is not None  # per-reader, as the send was made
    assert serve.returncode == 0
    assert serve.stderr is not None
    assert "Traceback" not in serve.stderr.read()


def test_a_click_before_the_send_is_recorded_does_not_hide_its_mode(project: Path) -> None:
    with running_service(project) as service:  # [tracking] clicks = "off" when serve started
        settings = service.settings
        link = next(
            x for x in issue_links(load_issue(settings.issues_dir, 14)) if x.url[:4] == "http"
        )
        early = click_token(SECRET, 14, link.place, link.url, list_name="main")
        assert httpx.get(f"{service.url}/r/{early}", follow_redirects=False).status_code == 302
        tracking = settings.tracking.model_copy(update={"clicks": "per-reader"})
        sent = tracked_send(settings.model_copy(update={"tracking": tracking}), READERS)
        href = sent[0].tracked()[1]
        assert httpx.get(href, follow_redirects=False).status_code == 302
        (event,) = events(settings, 1)
        assert event.row == sent[0].row


def test_an_aggregate_server_keeps_no_row_of_a_per_reader_token(project: Path) -> None:
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="per-reader") as service:
        href = tracked_send(service.settings, READERS)[0].tracked()[2]
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="aggregate") as service:
        path = href[href.index("/r/") :]
        assert httpx.get(service.url + path, follow_redirects=False).status_code == 302
        (event,) = events(service.settings, 1)
        assert (event.row, event.since_delivery) == (None, None)


@pytest.mark.slow
def test_a_forgotten_readers_token_still_leads_on_and_keeps_nothing(
    project: Path,
) -> None:
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="per-reader") as service:
        ann = tracked_send(service.settings, READERS)[0]
        href = ann.tracked()[2]
        with open_database(service.settings.database_target) as database:
            database.backend.run("DELETE FROM deliveries WHERE id = ?", (ann.row,))
        answer = httpx.get(href, follow_redirects=False)
        assert answer.status_code == 302
        target = verify_click(SECRET, token_of(href))
        issue = load_issue(service.settings.issues_dir, 14)
        assert (
            answer.headers["location"]
            == {link.place: link.url for link in issue_links(issue)}[target.place]
        )
        assert events(service.settings, 1, timeout=0.5) == []


def test_robots_are_asked_to_leave_tracked_links_alone(project: Path) -> None:
    with running_service(project) as service:
        assert "Disallow: /r/" in httpx.get(f"{service.url}/robots.txt").text
