"""check --online's redirect check against `newsletter serve`'s app on 127.0.0.1: every tracked
link of the issue answered with a redirect to its own link, and nothing kept of the check; a
server with another secret, one that is down, and one with another copy of the issue each
named; no secret or tracking off, nothing asked."""

from __future__ import annotations

import asyncio
from pathlib import Path

from newsletter.config.settings import Settings, load_settings
from newsletter.database import database_exists, open_database
from newsletter.issues import load_issue
from newsletter.mail.message import sample_message
from newsletter.models import Issue
from newsletter.preflight.faults import Fault
from newsletter.preflight.linkcheck import LinkChecker
from newsletter.preflight.lookup import Lookup
from newsletter.preflight.redirects import check_redirects
from newsletter.preflight.run import checking_tls_context, run_online
from newsletter.rendering.render import render_issue
from newsletter.state.statecache import Cache
from support.dnszone import ZoneResolver, closed_port
from support.onlineproject import configure
from support.site import SECRET, running_service

TRACKED = {"NEWSLETTER_TRACKING__CLICKS": "per-reader"}


def checked(
    settings: Settings, issue: Issue, secret: bytes | None = SECRET.encode()
) -> list[Fault]:
    check = settings.check.model_copy(update={"allow_private": True})
    cache = Cache(None)
    checker = LinkChecker(
        check, cache, lambda: checking_tls_context(settings), Lookup(check, cache)
    )
    return asyncio.run(check_redirects(settings, issue, checker, secret))


def settings_for(project: Path, base_url: str, **env: str) -> Settings:
    environ = {"NEWSLETTER_NEWSLETTER__BASE_URL": base_url, **TRACKED, **env}
    return load_settings(project / "newsletter.toml", environ=environ)


def test_every_tracked_link_answers_with_its_own_link(project: Path) -> None:
    with running_service(project, **TRACKED) as service:
        settings = service.settings
        issue = load_issue(settings.issues_dir, 14)
        assert checked(settings, issue) == []
        # Nothing of the check is kept: its tokens name no reader.
        if database_exists(settings.database_target):
            with open_database(settings.database_target) as database:
                assert database.clicks.count(14, "main") == 0


def test_a_server_with_another_secret_is_named(project: Path) -> None:
    with running_service(
        project, NEWSLETTER_SECRET="another-secret-0123456789abcdef", **TRACKED
    ) as service:
        (fault,) = checked(
            settings_for(project, service.url), load_issue(service.settings.issues_dir, 14)
        )
    assert fault.severity == "error"
    assert "refuses the tracked links' tokens (404)" in fault.message
    assert "NEWSLETTER_SECRET" in fault.message


def test_a_server_that_is_down_is_named(project: Path) -> None:
    settings = settings_for(project, f"http://127.0.0.1:{closed_port()}")
    (fault,) = checked(settings, load_issue(settings.issues_dir, 14))
    assert fault.message.startswith("the redirect endpoint does not answer: HEAD http://127.0.0.1:")
    assert fault.severity == "error"


def test_a_server_with_another_copy_of_the_issue_is_named(project: Path) -> None:
    with running_service(project, **TRACKED) as service:
        issue = load_issue(service.settings.issues_dir, 14)
        item = issue.sections[0].items[0]
        edited = item.model_copy(update={"url": "https://edited.example/"})
        here = issue.model_copy(
            update={
                "sections": [
                    issue.sections[0].model_copy(
                        update={"items": [edited, *issue.sections[0].items[1:]]}
                    ),
                    *issue.sections[1:],
                ]
            }
        )
        (fault,) = checked(service.settings, here)
    assert "1 of" in fault.message
    assert "not https://edited.example/" in fault.message


def test_nothing_is_asked_without_the_secret_or_tracking(project: Path) -> None:
    settings = settings_for(project, f"http://127.0.0.1:{closed_port()}")
    issue = load_issue(settings.issues_dir, 14)
    (fault,) = checked(settings, issue, secret=None)
    assert fault.severity == "warning"
    assert "NEWSLETTER_SECRET is not set" in fault.message
    off = settings_for(project, settings.newsletter.base_url, NEWSLETTER_TRACKING__CLICKS="off")
    assert checked(off, issue) == []


def test_check_online_asks_serve_for_the_tracked_links(
    project: Path, dns: tuple[int, ZoneResolver]
) -> None:
    environ = {"NEWSLETTER_SECRET": SECRET, **TRACKED}
    with running_service(project, **TRACKED) as service:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=service.url)
        settings = load_settings(project / "newsletter.toml", environ=environ)
        issue = load_issue(settings.issues_dir, 14)
        sample, _ = sample_message(render_issue(issue, settings), settings, "main")
        report = asyncio.run(run_online(settings, issue, sample.data, 9))
        assert [f for f in report.findings if f.code == "redirect"] == []
    down = asyncio.run(run_online(settings, issue, sample.data, 9))
    (fault,) = [f for f in down.findings if f.code == "redirect"]
    assert fault.level == "error"
    assert "the redirect endpoint does not answer" in fault.message
