"""`newsletter serve` over real HTTP on 127.0.0.1: one-click unsubscribe (RFC 8058), re-subscribe,
the web archive, hardening, and the editor's commands. Every test runs on a project copy."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import email
import email.policy
import os
import re
import shutil
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import Settings
from newsletter.database import database_exists, open_database
from newsletter.issues import load_issue
from newsletter.mail.tokens import health_proof, sign
from newsletter.models import DeliveryStatus
from newsletter.web.site.archive import Archive
from newsletter.web.site.guard import redact_path
from support.database import due, plan, record
from support.images import png
from support.sendcli import environment, newsletter
from support.site import (
    ALICE,
    SECRET,
    RunningService,
    first_format_token,
    message_for,
    one_click_url,
    running_service,
    serve_process,
)
from support.smtp import FaultyHandler, start
from support.weeklies import CHINESE, add_weekly

ONE_CLICK = {"List-Unsubscribe": "One-Click"}


@pytest.fixture
def service(project: Path) -> Iterator[RunningService]:
    with running_service(project) as running:
        yield running


def suppressions(settings: Settings) -> list[tuple[str, str, str]]:
    if not database_exists(settings.database_target):
        return []
    with open_database(settings.database_target) as database:
        return [(s.list, s.address, s.source) for s in database.suppressions.all()]


def cli_run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def dry_run_recipients(project: Path, env: dict[str, str]) -> tuple[set[str], str]:
    code, out, err = cli_run("send", "--issue", "14", "--dry-run", "--out", "dry", env=env)
    assert code == 0, err
    recipients = set()
    for path in (project / "dry").glob("*.eml"):
        parsed = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        recipients.add(str(parsed["To"].addresses[0].addr_spec))
    return recipients, out


# -- one-click ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_one_click_post_from_the_message_header_suppresses_and_the_dry_run_skips_it(
    project: Path, service: RunningService
) -> None:
    before, _ = dry_run_recipients(project, service.env)
    assert ALICE in before

    url = one_click_url(service.settings)
    assert url.startswith(f"{service.url}/unsubscribe/")
    # RFC 8058 section 3.1: a POST of exactly this body, no cookies, and no redirect to follow.
    response = httpx.post(url, data=ONE_CLICK, follow_redirects=False)
    assert response.status_code == 200
    assert suppressions(service.settings) == [("main", ALICE, "one-click")]
    with open_database(service.settings.database) as database:
        (row,) = database.suppressions.all("main")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", row.created_at)

    after, out = dry_run_recipients(project, service.env)
    assert after == before - {ALICE}
    assert "1 suppressed" in out


@pytest.mark.slow
async def test_a_real_send_after_a_one_click_skips_the_address(
    project: Path, service: RunningService
) -> None:
    assert httpx.post(one_click_url(service.settings), data=ONE_CLICK).status_code == 200
    handler = FaultyHandler()
    async with start(handler) as smtp:
        env = environment(smtp.port, NEWSLETTER_SECRET=SECRET)
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert done.code == 0, done.err
    delivered = set(handler.by_recipient)
    assert "li.lei@example.com" in delivered
    assert ALICE not in {a.lower() for a in delivered}
    # The log accounts for the address: skipped, and why.
    with open_database(service.settings.database) as database:
        rows = {row.recipient: row for row in database.deliveries.rows(14, "main")}
    assert rows[ALICE].state == DeliveryStatus.SKIPPED
    assert rows[ALICE].smtp_reply == "unsubscribed"
    status = await newsletter(["status", "--issue", "14"], env, project)
    assert "skipped" in status.out
    assert ALICE in status.out
    assert "unsubscribed" in status.out


def test_one_click_is_idempotent_and_accepts_multipart(service: RunningService) -> None:
    url = one_click_url(service.settings)
    # RFC 8058 says the POST SHOULD be multipart/form-data and MAY be urlencoded.
    first = httpx.post(url, files={"List-Unsubscribe": (None, "One-Click")})
    second = httpx.post(url, data=ONE_CLICK)
    assert (first.status_code, second.status_code) == (200, 200)
    assert suppressions(service.settings) == [("main", ALICE, "one-click")]
    events = [r.get("event") for r in service.access() if r["method"] == "POST"]
    assert events == ["unsubscribed", "already-unsubscribed"]


def test_a_token_for_staging_unsubscribes_from_staging_only(service: RunningService) -> None:
    url = one_click_url(service.settings, list_name="staging")
    assert httpx.post(url, data=ONE_CLICK).status_code == 200
    assert suppressions(service.settings) == [("staging", ALICE, "one-click")]


@pytest.mark.slow
def test_get_never_unsubscribes_and_shows_one_button_in_the_newsletters_language(
    service: RunningService,
) -> None:
    url = one_click_url(service.settings)
    for _ in range(3):
        page = httpx.get(url)
        assert httpx.head(url).status_code == 200
    assert page.status_code == 200
    assert suppressions(service.settings) == []
    html = page.text
    assert '<html lang="zh-CN">' in html
    assert "确定要将 alice@example.net 从「AI系统内容推荐」退订吗？" in html
    assert html.count("<form") == 1
    assert html.count("<button") == 1
    assert '<form method="post">' in html  # posts back to this URL
    assert '<input type="hidden" name="List-Unsubscribe" value="One-Click">' in html
    assert "<script" not in html
    assert page.headers["cache-control"] == "no-store"


BROWSER = {"accept": "text/html,application/xhtml+xml", "origin": "http://127.0.0.1"}


def test_the_confirm_button_post_shows_the_done_page_with_a_resubscribe_form(
    service: RunningService,
) -> None:
    url = one_click_url(service.settings)
    done = httpx.post(url, data=ONE_CLICK, headers=BROWSER, follow_redirects=False)
    assert done.status_code == 200
    assert "已退订" in done.text
    token = url.rsplit("/", 1)[1]
    assert f'<form method="post" action="../resubscribe/{token}">' in done.text
    assert '<input type="hidden" name="Resubscribe" value="Yes">' in done.text
    # A browser's form POST carries Origin; the record says the reader used the page.
    assert suppressions(service.settings) == [("main", ALICE, "web")]
    # Opening the link again shows the done page, not the button.
    assert "已退订" in httpx.get(url).text


def test_resubscribe_needs_the_token_and_a_post(service: RunningService) -> None:
    url = one_click_url(service.settings)
    httpx.post(url, data=ONE_CLICK)
    resubscribe = url.replace("/unsubscribe/", "/resubscribe/")
    assert httpx.get(resubscribe).status_code == 405
    assert httpx.post(resubscribe, data={"Resubscribe": "No"}).status_code == 400
    forged = resubscribe.replace(
        url.rsplit("/", 1)[1], sign("another-secret-0123456789", "main", ALICE)
    )
    assert httpx.post(forged, data={"Resubscribe": "Yes"}).status_code == 403
    assert suppressions(service.settings) == [("main", ALICE, "one-click")]
    again = httpx.post(resubscribe, data={"Resubscribe": "Yes"})
    assert again.status_code == 200
    assert "已重新订阅" in again.text
    assert suppressions(service.settings) == []


def test_resubscribe_cannot_undo_the_editors_unsubscribe(
    project: Path, service: RunningService
) -> None:
    assert cli_run("unsubscribe", ALICE, "--list", "main", env=service.env)[0] == 0
    resubscribe = one_click_url(service.settings).replace("/unsubscribe/", "/resubscribe/")
    refused = httpx.post(resubscribe, data={"Resubscribe": "Yes"})
    assert refused.status_code == 409
    assert suppressions(service.settings) == [("main", ALICE, "cli")]
    # Their link shows them unsubscribed, without a re-subscribe button that could not work.
    for shown in (
        httpx.get(one_click_url(service.settings)),
        httpx.post(one_click_url(service.settings), data=ONE_CLICK, headers=BROWSER),
    ):
        assert "已退订" in shown.text
        assert "<form" not in shown.text
    assert suppressions(service.settings) == [("main", ALICE, "cli")]


def test_the_editors_unsubscribe_wins_over_the_readers_one_click(service: RunningService) -> None:
    # issue 13.9: after a one-click, the editor's unsubscribe kept the source `one-click`, so
    # the reader's re-subscribe button lifted the editor's suppression.
    url = one_click_url(service.settings)
    assert httpx.post(url, data=ONE_CLICK).status_code == 200
    code, out, _ = cli_run("unsubscribe", ALICE, "--list", "main", env=service.env)
    assert code == 0
    assert out == (
        f"{ALICE} was already unsubscribed by the reader (one-click), now by you from 'main'; "
        "later sends to it skip this address\n"
    )
    assert suppressions(service.settings) == [("main", ALICE, "cli")]
    resubscribe = url.replace("/unsubscribe/", "/resubscribe/")
    assert httpx.post(resubscribe, data={"Resubscribe": "Yes"}).status_code == 409
    assert suppressions(service.settings) == [("main", ALICE, "cli")]
    # A later one-click by the reader leaves the editor's suppression as it is.
    assert httpx.post(url, data=ONE_CLICK).status_code == 200
    assert suppressions(service.settings) == [("main", ALICE, "cli")]
    assert cli_run("unsubscribe", ALICE, "--list", "main", env=service.env)[1].startswith(
        f"{ALICE} was already unsubscribed from 'main'"
    )


# -- Host header and slow bodies -----------------------------------------------------------------


def test_a_foreign_host_header_is_refused_and_redirects_are_relative(
    service: RunningService,
) -> None:
    # issue 13.5: `Host: evil.example` gave `location: http://evil.example/unsubscribe`.
    evil = {"Host": "evil.example", "X-Forwarded-Proto": "https"}
    for path in ("/unsubscribe/", "/", "/issues/14"):
        refused = httpx.get(service.url + path, headers=evil, follow_redirects=False)
        assert refused.status_code == 400
        assert "evil.example" not in refused.text
        assert "location" not in refused.headers
    moved = httpx.get(
        service.url + "/unsubscribe/",
        headers={"X-Forwarded-Proto": "https"},
        follow_redirects=False,
    )
    assert moved.status_code in (301, 307, 308)
    assert moved.headers["location"] == "../unsubscribe"
    assert httpx.get(service.url + "/unsubscribe/", follow_redirects=True).status_code == 200


def test_the_public_name_from_base_url_and_loopback_names_are_answered(project: Path) -> None:
    with running_service(
        project, NEWSLETTER_NEWSLETTER__BASE_URL="https://news.example.org/"
    ) as on:
        port = on.url.rsplit(":", 1)[1]
        for host in ("news.example.org", "NEWS.example.org", f"localhost:{port}", "[::1]"):
            assert httpx.get(on.url + "/healthz", headers={"Host": host}).status_code == 200
        assert httpx.get(on.url + "/healthz", headers={"Host": "example.org"}).status_code == 400


def test_healthz_proves_the_secret_for_a_probe_and_signs_nothing_else(project: Path) -> None:
    """`newsletter doctor`'s probe: the proof is the secret's MAC of the word, not the secret;
    a word that is not a short base64url one gets the plain answer."""
    probe = "Zm9vYmFyYmF6cXV4cXV1eA"
    with running_service(project) as on:
        answer = httpx.get(f"{on.url}/healthz", params={"probe": probe})
        assert answer.text == f"ok\nproof {health_proof(SECRET.encode(), probe)}\n"
        assert SECRET not in answer.text
        assert health_proof(b"another-secret-0123456789", probe) not in answer.text
        for odd in ("short", "x" * 65, "has space in it 0123", "a/b+c=0123456789abc"):
            plain = httpx.get(f"{on.url}/healthz", params={"probe": odd})
            assert plain.text == "ok\n", odd


@pytest.mark.slow
def test_a_body_shorter_than_its_content_length_times_out(project: Path) -> None:
    # issue 13: the POST was held open for ever.
    with running_service(project, body_timeout=0.5) as on:
        token = one_click_url(on.settings).rsplit("/", 1)[1]
        host, port = on.url.removeprefix("http://").split(":")
        # The socket's timeout only guards against a hang: a server that held the POST open
        # would fail the test there; the 408 says the server's own deadline ended it.
        with socket.create_connection((host, int(port)), timeout=60) as conn:
            conn.sendall(
                f"POST /unsubscribe/{token} HTTP/1.1\r\nHost: {host}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                "Content-Length: 26\r\n\r\nList-Unsub".encode()
            )
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert suppressions(on.settings) == []


def test_links_made_before_the_secret_was_rotated_still_unsubscribe(project: Path) -> None:
    # issue 13: rotating NEWSLETTER_SECRET made every link already sent answer 403.
    new = "the-new-secret-after-rotation-0123456789"
    with running_service(
        project, NEWSLETTER_SECRET=new, NEWSLETTER_SECRET_PREVIOUS=SECRET
    ) as rotated:
        old_link = one_click_url(rotated.settings)  # made with SECRET, the old value
        assert httpx.post(old_link, data=ONE_CLICK).status_code == 200
        fresh = f"{rotated.url}/unsubscribe/{sign(new, 'main', 'bob@example.net')}"
        assert httpx.post(fresh, data=ONE_CLICK).status_code == 200
        stranger = sign("never-configured-secret-0123456789", "main", "carol@example.net")
        assert (
            httpx.post(f"{rotated.url}/unsubscribe/{stranger}", data=ONE_CLICK).status_code == 403
        )
        assert {(a, s) for _, a, s in suppressions(rotated.settings)} == {
            (ALICE, "one-click"),
            ("bob@example.net", "one-click"),
        }


# -- tokens that must not work --------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def bad_tokens(good: str) -> dict[str, str]:
    kid, box = good.split(".")
    _, other_box = sign("not-the-servers-secret-123456", "main", ALICE).split(".")
    old_kid, payload, mac = first_format_token(SECRET, "main", ALICE).split(".")
    bob, staging = _b64("main\nbob@example.net"), _b64(f"staging\n{ALICE}")
    return {
        "forged with another key": sign("not-the-servers-secret-123456", "main", ALICE),
        "another key's box under this key id": f"{kid}.{other_box}",
        "box flipped": f"{kid}.{box[:-2]}{'A' if box[-2] != 'A' else 'B'}{box[-1]}",
        "truncated": good[:-6],
        "key id only": kid,
        "box only": box,
        "padded": good + "=",
        "other list": sign(SECRET, "not-a-list", ALICE),
        "garbage": "x" * 3000,
        # Links sent before tokens were made opaque: still verified, still unforgeable.
        "first format, address swapped": f"{old_kid}.{bob}.{mac}",
        "first format, list swapped": f"{old_kid}.{staging}.{mac}",
        "first format, mac flipped": f"{old_kid}.{payload}.{mac[:-2]}"
        f"{'A' if mac[-2] != 'A' else 'B'}{mac[-1]}",
        "first format, truncated at a dot": f"{old_kid}.{payload}",
    }


@pytest.mark.parametrize("kind", list(bad_tokens(sign(SECRET, "main", ALICE))))
def test_bad_tokens_are_refused_and_change_nothing(service: RunningService, kind: str) -> None:
    good = one_click_url(service.settings).rsplit("/", 1)[1]
    token = bad_tokens(good)[kind]
    url = f"{service.url}/unsubscribe/{token}"
    posted = httpx.post(url, data=ONE_CLICK)
    assert posted.status_code in (400, 403), posted.status_code
    shown = httpx.get(url)
    assert shown.status_code in (400, 403)
    assert "链接无效" in shown.text
    resubscribed = httpx.post(
        url.replace("/unsubscribe/", "/resubscribe/"), data={"Resubscribe": "Yes"}
    )
    assert resubscribed.status_code in (400, 403)
    assert suppressions(service.settings) == []


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"", "application/x-www-form-urlencoded"),
        (b"List-Unsubscribe=one-click", "application/x-www-form-urlencoded"),
        (
            b"List-Unsubscribe=One-Click&List-Unsubscribe=One-Click",
            "application/x-www-form-urlencoded",
        ),
        (b"List-Unsubscribe=One-Click&email=x@example.org", "application/x-www-form-urlencoded"),
        (b"Unsubscribe=One-Click", "application/x-www-form-urlencoded"),
        (b'{"List-Unsubscribe": "One-Click"}', "application/json"),
        (b"List-Unsubscribe=One-Click", "text/plain"),
        ("List-Unsubscribe=One-Click\u00e9".encode(), "application/x-www-form-urlencoded"),
    ],
)
def test_only_the_one_click_field_is_accepted(
    service: RunningService, content: bytes, content_type: str
) -> None:
    url = one_click_url(service.settings)
    response = httpx.post(url, content=content, headers={"content-type": content_type})
    assert response.status_code == 400
    assert suppressions(service.settings) == []


def test_multipart_with_a_file_or_an_extra_field_is_refused(service: RunningService) -> None:
    url = one_click_url(service.settings)
    with_file = httpx.post(url, files={"List-Unsubscribe": ("x.txt", b"One-Click")})
    extra = httpx.post(url, files={"List-Unsubscribe": (None, "One-Click"), "x": (None, "y")})
    assert (with_file.status_code, extra.status_code) == (400, 400)
    assert suppressions(service.settings) == []


def test_concurrent_posts_for_one_token_leave_one_suppression(service: RunningService) -> None:
    url = one_click_url(service.settings)

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=25)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            responses = await asyncio.gather(*(client.post(url, data=ONE_CLICK) for _ in range(25)))
        return [r.status_code for r in responses]

    assert asyncio.run(burst()) == [200] * 25
    with open_database(service.settings.database) as database:
        assert len(database.suppressions.all()) == 1
    events = [r.get("event") for r in service.access() if r["method"] == "POST"]
    assert events.count("unsubscribed") == 1
    assert events.count("already-unsubscribed") == 24


# -- the archive ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("all_published")
def test_the_archive_index_lists_issue_14(service: RunningService) -> None:
    page = httpx.get(f"{service.url}/")
    assert page.status_code == 200
    assert '<a href="issues/14">AI系统内容推荐第14期</a>' in page.text
    assert "第 14 期" in page.text
    assert "往期回顾" in page.text


def test_the_index_dates_an_issue_by_its_file_or_its_first_send(
    project: Path, service: RunningService
) -> None:
    index = f"{service.url}/"
    assert "<time" not in httpx.get(index).text  # issue 14 has no date and was never sent
    mark_sent(service.settings, "staging", ["editor@news.example.org"])
    assert "<time" not in httpx.get(index).text  # a test send does not date it
    mark_sent(service.settings, "main", [ALICE, "bob@example.net"])
    with open_database(service.settings.database) as database:
        day = min(str(r.sent_at) for r in database.deliveries.rows(14, "main"))[:10]
    assert f'<time datetime="{day}">{day}</time>' in httpx.get(index).text
    path = project / "issues" / "14.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "date: 2021-11-08\n", encoding="utf-8")
    assert '<time datetime="2021-11-08">2021-11-08</time>' in httpx.get(index).text


def test_the_email_is_dated_by_its_file_or_its_first_send(
    project: Path, service: RunningService
) -> None:
    """The archive page shows no date for an issue never sent; `build` (like a send) shows the
    day it would go out; after the first send to subscribers both show that day."""
    page = f"{service.url}/issues/14"
    assert 'class="nl-date"' not in httpx.get(page).text
    today = dt.datetime.now(dt.UTC).date()
    assert cli_run("build", "--issue", "14")[0] == 0
    built = (project / "out" / "14" / "email.html").read_text(encoding="utf-8")
    assert f'<time datetime="{today.isoformat()}">' in built
    mark_sent(service.settings, "main", [ALICE])
    with sqlite3.connect(service.settings.database) as db:  # as if it went out on 1 Nov 2021
        db.execute("UPDATE deliveries SET sent_at = '2021-11-01T09:30:00.000+00:00'")
    db.close()
    assert '<time datetime="2021-11-01">2021年11月1日</time>' in httpx.get(page).text
    assert cli_run("build", "--issue", "14")[0] == 0
    built = (project / "out" / "14" / "email.html").read_text(encoding="utf-8")
    assert '<time datetime="2021-11-01">2021年11月1日</time>' in built
    assert "AI系统内容推荐 · 2021年11月1日" in (project / "out" / "14" / "email.txt").read_text(
        encoding="utf-8"
    )


def mark_sent(settings: Settings, list_name: str, addresses: list[str]) -> None:
    with open_database(settings.database_target) as database:
        plan(database, 14, list_name, addresses)
        for row in due(database, 14, list_name):
            record(database, row.id, DeliveryStatus.SENT)


@pytest.mark.slow
def test_by_default_drafts_stay_private_until_they_are_sent(project: Path) -> None:
    # issue 29: with publish = "all" the default, `newsletter new`'s empty draft was on the
    # index, its page and the feed at once. The shipped config and the default say "sent".
    assert Settings().serve.publish == "sent"
    code, _, err = cli_run("new")
    assert code == 0, err
    assert (project / "issues" / "15.yaml").is_file()
    with running_service(project) as service:
        index, page = f"{service.url}/", f"{service.url}/issues/14"
        assert service.settings.serve.publish == "sent"
        assert "还没有发布任何一期" in httpx.get(index).text
        for number in (14, 15):
            assert httpx.get(f"{service.url}/issues/{number}").status_code == 404
        assert "<entry>" not in httpx.get(f"{service.url}/feed.xml").text
        mark_sent(service.settings, "staging", ["editor@news.example.org"])
        # The testers' "view in browser" link works; the index and feed do not list it yet.
        assert httpx.get(page).status_code == 200
        assert "issues/14" not in httpx.get(index).text
        assert "<entry>" not in httpx.get(f"{service.url}/feed.xml").text
        mark_sent(service.settings, "main", [ALICE])
        assert '<a href="issues/14">AI系统内容推荐第14期</a>' in httpx.get(index).text
        assert f"{service.url}/issues/14" in httpx.get(f"{service.url}/feed.xml").text
        assert "issues/15" not in httpx.get(index).text  # the new draft: still private
        assert httpx.get(f"{service.url}/issues/15").status_code == 404
    assert cli_run("build", "--site", "site")[0] == 0
    assert (project / "site" / "issues" / "14" / "index.html").exists()
    assert not (project / "site" / "issues" / "15").exists()
    (project / ".newsletter" / "outbox.sqlite3").unlink()
    shutil.rmtree(project / "site")
    assert cli_run("build", "--site", "site")[0] == 0
    assert not (project / "site" / "issues").exists()
    assert "还没有发布任何一期" in (project / "site" / "index.html").read_text(encoding="utf-8")
    # "all" stays an explicit choice: every issue file, the new draft included.
    with running_service(project, NEWSLETTER_SERVE__PUBLISH="all") as service:
        assert httpx.get(f"{service.url}/issues/15").status_code == 200
        assert 'href="issues/15"' in httpx.get(f"{service.url}/").text


@pytest.mark.usefixtures("all_published")
def test_the_archive_shows_issue_14_with_every_title_and_nothing_personal(
    service: RunningService,
) -> None:
    settings = service.settings
    message = message_for(settings, ALICE)
    html_part = message.get_body(("html",))
    assert html_part is not None
    web_url = f"{service.url}/issues/14"
    # The email's "view in browser" link is this page.
    assert f'href="{web_url}"' in html_part.get_content()

    page = httpx.get(web_url)
    assert page.status_code == 200
    issue = load_issue(settings.issues_dir, 14)
    titles = [issue.title] + [str(s.title) for s in issue.sections]
    titles += [str(item.title) for s in issue.sections for item in s.items]
    assert len(titles) > 10
    import html as html_lib

    for title in titles:
        assert html_lib.escape(title) in page.text or title in page.text, title
    assert "朋友，你好！" in page.text
    assert "__NL_" not in page.text
    assert "/unsubscribe/" not in page.text  # no one's token
    assert f'href="{service.url}/unsubscribe"' in page.text
    for personal in (ALICE, "Alice", settings.newsletter.sample_email, "示例读者"):
        assert personal not in page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "img-src https: data:" in page.headers["content-security-policy"]
    assert httpx.get(f"{service.url}/issues/14/").text == page.text


def test_the_archives_unsubscribe_link_explains_how_to_unsubscribe(service: RunningService) -> None:
    page = httpx.get(f"{service.url}/unsubscribe")
    assert page.status_code == 200
    assert "如何退订" in page.text
    assert "<form" not in page.text
    assert suppressions(service.settings) == []


def test_an_unknown_issue_is_a_404_page(service: RunningService) -> None:
    for path in ("/issues/99", "/nowhere", "/issues/abc"):
        page = httpx.get(service.url + path)
        assert page.status_code == 404
        assert "页面不存在" in page.text


@pytest.mark.usefixtures("all_published")
def test_a_broken_issue_file_is_a_500_page_without_details(
    project: Path, service: RunningService
) -> None:
    (project / "issues" / "15.yaml").write_text("number: 15\ntitle: [unclosed\n", encoding="utf-8")
    page = httpx.get(f"{service.url}/issues/15")
    assert page.status_code == 500
    assert "出错了" in page.text
    for leak in ("Traceback", "15.yaml", "YAML", str(project)):
        assert leak not in page.text
    # The index lists the issues that work, and the editor finds the cause in the server log.
    assert '<a href="issues/14">' in httpx.get(f"{service.url}/").text
    assert service.wait_for_log("15.yaml")


@pytest.mark.parametrize(
    ("text", "logged"),
    [
        # issue 13.2: the whole index answered 500 while this file existed.
        ("number: 150\ntitle: T\ndate: 2021-02-30\n", "issues/150.yaml:3: date: 2021-02-30"),
        # issue 13.3: RecursionError in the line index walk, for the index and the issue.
        (
            "number: 150\ntitle: T\nsections: " + "[" * 990 + "]" * 990 + "\n",
            "issues/150.yaml:3: sections[0][0]",
        ),
    ],
)
@pytest.mark.usefixtures("all_published")
def test_the_index_skips_an_issue_yaml_cannot_build_and_logs_why(
    project: Path, service: RunningService, text: str, logged: str
) -> None:
    (project / "issues" / "150.yaml").write_text(text, encoding="utf-8")
    for _ in range(2):
        index = httpx.get(f"{service.url}/")
        assert index.status_code == 200
        assert '<a href="issues/14">' in index.text
        assert "issues/150" not in index.text
    page = httpx.get(f"{service.url}/issues/150")
    assert page.status_code == 500
    assert "Traceback" not in page.text
    assert service.wait_for_log(f"the archive index skips a broken issue: {logged}")
    assert sum("the archive index skips" in line for line in service.log.lines) == 1
    assert service.wait_for_log(f"issue 150 cannot be shown: {logged}")
    assert not any("Traceback" in line or "RecursionError" in line for line in service.log.lines)


def test_a_server_fault_shows_no_stack_trace(project: Path, service: RunningService) -> None:
    # The state folder is a file: opening the database fails inside the request.
    (project / ".newsletter").write_text("not a folder")
    response = httpx.post(one_click_url(service.settings), data=ONE_CLICK)
    assert response.status_code == 500
    assert "出错了" in response.text
    for leak in ("Traceback", "sqlite", "outbox", str(project), "Error"):
        assert leak not in response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert service.wait_for_log("Traceback")  # for the operator


# -- hardening ------------------------------------------------------------------------------------


def test_every_answer_has_the_security_headers(service: RunningService) -> None:
    url = one_click_url(service.settings)
    responses = [
        httpx.get(f"{service.url}/"),
        httpx.get(f"{service.url}/issues/14"),
        httpx.get(f"{service.url}/unsubscribe"),
        httpx.get(url),
        httpx.post(url, data=ONE_CLICK),
        httpx.get(f"{service.url}/issues/99"),
        httpx.post(url, content=b"x" * 10_000),
        httpx.get(f"{service.url}/healthz"),
    ]
    for response in responses:
        headers = response.headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "script-src" not in csp  # no scripts at all
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["x-frame-options"] == "DENY"
        assert "server" not in headers
        assert response.status_code < 300 or "location" not in headers


def test_an_oversize_body_is_refused(service: RunningService) -> None:
    url = one_click_url(service.settings)
    declared = httpx.post(url, content=b"List-Unsubscribe=One-Click&" + b"x" * 8000)
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:
        yield b"List-Unsubscribe=One-Click"
        for _ in range(10):
            yield b"&" + b"x" * 1000

    streamed = httpx.post(
        url, content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert streamed.status_code == 413
    assert suppressions(service.settings) == []


def test_the_access_log_never_contains_a_token(
    service: RunningService, caplog: pytest.LogCaptureFixture
) -> None:
    url = one_click_url(service.settings)
    token = url.rsplit("/", 1)[1]
    httpx.get(url)
    httpx.post(url, data=ONE_CLICK)
    httpx.post(url.replace("/unsubscribe/", "/resubscribe/"), data={"Resubscribe": "Yes"})
    httpx.get(f"{service.url}/unsubscribe/{token}x")
    records = service.access()
    assert [(r["method"], r["path"], r["status"]) for r in records] == [
        ("GET", "/unsubscribe/[token]", 200),
        ("POST", "/unsubscribe/[token]", 200),
        ("POST", "/resubscribe/[token]", 200),
        ("GET", "/unsubscribe/[token]", 403),
    ]
    assert records[1]["event"] == "unsubscribed"
    assert records[1]["list"] == "main"
    assert all(r["client"] == "127.0.0.1" and r["ms"] >= 0 for r in records)
    # Every server-side record, uvicorn's included (the client's own httpx log is not ours).
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    everything = "\n".join([*service.log.lines, *(r.getMessage() for r in server_side)])
    for secret_part in (token, *token.split("."), ALICE):
        assert secret_part not in everything


def test_redact_hides_tokens_anywhere_in_a_path() -> None:
    token = sign(SECRET, "main", ALICE)
    assert redact_path(f"/unsubscribe/{token}") == "/unsubscribe/[token]"
    assert redact_path(f"/resubscribe/{token}/more") == "/resubscribe/[token]/more"
    assert redact_path(f"/elsewhere/{token}") == "/elsewhere/[token]"
    assert redact_path("/issues/14") == "/issues/14"


@pytest.mark.usefixtures("all_published")
@pytest.mark.slow
def test_serve_runs_as_a_process_and_logs_json_without_tokens(project: Path) -> None:
    env = {
        **os.environ,
        "NEWSLETTER_SECRET": SECRET,
        "NEWSLETTER_NEWSLETTER__BASE_URL": "http://news.example.org",
    }
    token = sign(SECRET, "main", ALICE)
    with serve_process(project, env) as (base, process):
        assert httpx.post(f"{base}/unsubscribe/{token}", data=ONE_CLICK).status_code == 200
        assert httpx.get(f"{base}/issues/14").status_code == 200
        (project / "issues" / "15.yaml").write_text("number: 15\n", encoding="utf-8")
        assert httpx.get(f"{base}/issues/15").status_code == 500
    # Through the same buffered reader as the first line (communicate() would skip its buffer).
    assert process.stderr is not None
    err = process.stderr.read()
    assert process.returncode == 0
    assert '"path": "/unsubscribe/[token]", "status": 200' in err
    assert token not in err
    assert token.split(".")[1] not in err
    assert "Traceback" not in err
    assert "note: newsletter.base_url is not https://" in err
    # The editor's mistake is told to the operator, naming the file and field.
    assert "issue 15 cannot be shown: issues/15.yaml" in err
    assert "title: is required" in err
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        assert database.suppressions.contains("main", ALICE)


def test_serve_without_the_secret_explains_and_exits(project: Path) -> None:
    code, _, err = cli_run("serve", "--port", "0")
    assert code == 1
    assert "NEWSLETTER_SECRET is not set" in err


# -- the editor's commands and the static site ----------------------------------------------------


def test_unsubscribe_and_suppressions_commands(project: Path, settings: Settings) -> None:
    code, out, _ = cli_run("unsubscribe", " Bob@Example.NET ", "--list", "main")
    assert code == 0
    assert out == "bob@example.net unsubscribed from 'main'; later sends to it skip this address\n"
    code, out, _ = cli_run("unsubscribe", "bob@example.net", "--list", "main")
    assert "was already unsubscribed" in out
    assert cli_run("unsubscribe", "carol@例子.公司", "--list", "staging")[0] == 0
    code, out, err = cli_run("suppressions")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[1:] for line in lines] == [
        ["main", "bob@example.net", "cli"],
        ["staging", "carol@xn--fsqu00a.xn--55qx5d", "cli"],
    ]
    assert err == "2 suppressed address(es)\n"
    code, out, err = cli_run("suppressions", "--list", "staging")
    assert len(out.splitlines()) == 1
    assert err == "1 suppressed address(es) on 'staging'\n"
    code, out, _ = cli_run("unsubscribe", "BOB@example.net", "--list", "main", "--undo")
    assert out == "bob@example.net will be sent to again on 'main'\n"
    code, out, _ = cli_run("unsubscribe", "bob@example.net", "--list", "main", "--undo")
    assert out == "bob@example.net was not unsubscribed on 'main'\n"
    assert cli_run("suppressions", "--list", "main")[1] == ""


def test_unsubscribe_command_refuses_bad_input(project: Path) -> None:
    code, _, err = cli_run("unsubscribe", "not-an-address", "--list", "main")
    assert code == 1
    assert "'not-an-address' is not an email address" in err
    code, _, err = cli_run("unsubscribe", ALICE, "--list", "nope")
    assert code == 1
    assert "no list named 'nope'" in err
    code, _, err = cli_run("suppressions", "--list", "nope")
    assert code == 1
    assert not (project / ".newsletter").exists()


@pytest.mark.usefixtures("all_published")
def test_build_site_writes_the_same_pages_as_serve(project: Path, settings: Settings) -> None:
    code, out, err = cli_run("build", "--site", "site")
    assert code == 0, err
    assert (
        out.splitlines()[0]
        == "site/  web archive: 3 pages (1 issue(s), the index and how-to-unsubscribe) and feed.xml"
    )
    archive = Archive(settings)
    site = project / "site"
    assert (site / "issues" / "14" / "index.html").read_text(
        encoding="utf-8"
    ) == archive.issue_page(14)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert '<a href="issues/14/index.html">AI系统内容推荐第14期</a>' in index
    assert "如何退订" in (site / "unsubscribe" / "index.html").read_text(encoding="utf-8")
    assert not (project / "out").exists()  # no --issue: no email files


@pytest.mark.usefixtures("all_published")
def test_build_issue_and_site_together_and_neither(project: Path) -> None:
    code, _, _ = cli_run("build", "--issue", "14", "--site", "site")
    assert code == 0
    assert (project / "out" / "14" / "email.eml").exists()
    assert (project / "site" / "issues" / "14" / "index.html").exists()
    code, _, err = cli_run("build")
    assert code == 2
    assert "Missing option '--issue' (or --site DIR for the web archive)" in err


@pytest.mark.usefixtures("all_published")
def test_build_site_builds_what_loads_and_names_what_it_left_out(project: Path) -> None:
    """Issue 42: one issue file that does not load costs its own page, not the archive."""
    sixteen = project / "issues" / "16.md"
    good = "---\nnumber: 16\ntitle: Sixteen\n---\n\n## Links\n\nA line.\n"
    sixteen.write_text(good, encoding="utf-8")
    assert cli_run("build", "--site", "site")[0] == 0
    site = project / "site"
    earlier = (site / "issues" / "16" / "index.html").read_text(encoding="utf-8")
    (project / "issues" / "15.yaml").write_text("number: 15\ntitle: x\n", encoding="utf-8")
    sixteen.write_text(
        good.replace("title: Sixteen\n", "title: Sixteen\ndate: 2026-13-45\n"), encoding="utf-8"
    )
    code, out, err = cli_run("build", "--site", "site")
    # Built, yet not all of it: exit 1, so that a deploy step after it does not run.
    assert code == 1
    assert out.splitlines() == [
        "site/  web archive: 3 pages (1 issue(s), the index and how-to-unsubscribe) and feed.xml"
    ]
    assert err.splitlines() == [
        "error: issues/15.yaml:1: has no sections and no intro: there is nothing to send",
        "issues/16.md:4: date: 2026-13-45 is not a real date (month must be in 1..12); fix it, "
        'or put it in quotes if it is meant as text: "2021-02-30"',
        "hint: Left out of the archive: issue(s) 15, 16 (no page, index line or feed entry; a "
        "page an earlier build wrote is left as it was). Every other page was written. Fix the "
        "lines named above and build again.",
    ]
    assert (site / "issues" / "14" / "index.html").is_file()
    assert not (site / "issues" / "15").exists()
    # The page the emails of issue 16 link is still the one that was published.
    assert (site / "issues" / "16" / "index.html").read_text(encoding="utf-8") == earlier
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "issues/14/index.html" in index
    assert "issues/15/" not in index
    assert "issues/16/" not in index
    feed = (site / "feed.xml").read_text(encoding="utf-8")
    assert "/issues/14" in feed
    assert "/issues/16" not in feed
    # Fixed, the next build has them all and exits 0.
    (project / "issues" / "15.yaml").unlink()
    sixteen.write_text(good, encoding="utf-8")
    code, _, err = cli_run("build", "--site", "site")
    assert code == 0, err
    assert "issues/16/index.html" in (site / "index.html").read_text(encoding="utf-8")


@pytest.mark.usefixtures("all_published")
@pytest.mark.slow
def test_serve_publishes_the_images_under_issues_that_an_issue_shows(project: Path) -> None:
    # issue 20: an image under issues/ is linked at base_url/issues/SRC in the email.
    add_weekly(project, CHINESE)
    (project / "issues" / "images" / "unused.png").write_bytes(png(10, 10))
    with running_service(project) as service:
        cover = httpx.get(f"{service.url}/issues/images/cover.png")
        assert cover.status_code == 200
        assert cover.headers["content-type"] == "image/png"
        assert cover.content == (project / "issues" / "images" / "cover.png").read_bytes()
        assert httpx.get(f"{service.url}/issues/21").status_code == 200
        for path in (
            "/issues/21.md",
            "/issues/14.yaml",
            "/issues/images/unused.png",
            "/issues/images/%2e%2e/%2e%2e/newsletter.toml",
            "/issues/images/../21.md",
        ):
            assert httpx.get(f"{service.url}{path}").status_code == 404, path
    with running_service(project, NEWSLETTER_SERVE__PUBLISH="sent") as service:
        # A draft's images stay private, like its page.
        assert httpx.get(f"{service.url}/issues/images/cover.png").status_code == 404


@pytest.mark.usefixtures("all_published")
def test_build_site_writes_the_images_the_emails_link(project: Path) -> None:
    add_weekly(project, CHINESE)
    code, out, err = cli_run("build", "--site", "site")
    assert code == 0, err
    assert out.splitlines()[0] == (
        "site/  web archive: 4 pages (2 issue(s), the index and how-to-unsubscribe),"
        " feed.xml and 6 image(s)"
    )
    for name in ("cover.png", "harbour.png", "stop-1.png", "stop-2.png", "lamp.png", "kiosk.png"):
        written = project / "site" / "issues" / "images" / name
        assert written.read_bytes() == (project / "issues" / "images" / name).read_bytes()
    page = (project / "site" / "issues" / "21" / "index.html").read_text(encoding="utf-8")
    assert 'src="https://news.example.org/issues/images/cover.png"' in page
