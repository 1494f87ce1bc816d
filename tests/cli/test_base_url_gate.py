"""A send to a real list with a base_url readers cannot reach (issue 41): init's
http://127.0.0.1:8025, any loopback host, or plain http. Every unsubscribe and archive link of
a sent issue starts with base_url for good, so the send refuses it (--force overrides) and a
booked send is not booked; a staging send is not refused; `check` says so in a note and never
fails for it, so the workflow `init` writes (`check --format github` on each changed issue)
passes in a project init has just made. Real `newsletter` processes, a real SMTP server."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.sendcli import environment, newsletter
from support.smtp import FaultyHandler, start

LOCAL = "http://127.0.0.1:8025"  # init's default: the local `serve`


@pytest.mark.slow
async def test_a_send_to_a_real_list_refuses_a_base_url_readers_cannot_reach(
    project: Path,
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        for base_url, why in (
            (LOCAL, "127.0.0.1 is this machine (loopback)"),
            ("https://localhost:8443", "localhost is this machine (loopback)"),
            ("https://[::1]", "::1 is this machine (loopback)"),
            ("http://news.example.org", "it is not https"),
        ):
            env = environment(server.port, NEWSLETTER_NEWSLETTER__BASE_URL=base_url)
            done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
            assert done.code == 1, done.out + done.err
            assert f"error: [newsletter] base_url is {base_url}: {why}" in done.err, done.err
            assert "[base-url]" in done.err
            assert "or --force to send to 'main' anyway" in done.err
            assert "refusing to send issue 14 to the 'main' list" in done.err
            assert "Traceback" not in done.err
        assert handler.connections == 0  # refused before the server was asked

        env = environment(server.port, NEWSLETTER_NEWSLETTER__BASE_URL=LOCAL)
        staging = await newsletter(["send", "--issue", "14", "--list", "staging"], env, project)
        assert staging.code == 0, staging.err  # a test send to the editor: what it is for
        assert "[base-url]" not in staging.out + staging.err
        tested = len(handler.by_recipient)
        assert tested == 2

        forced = await newsletter(["send", "--issue", "14", "--yes", "--force"], env, project)
        assert forced.code == 0, forced.err
        assert "--force: sending issue 14 despite 1 error(s)" in forced.err
        assert len(handler.by_recipient) == tested + 5

        public = environment(server.port)  # the project's own https://news.example.org
        checked = await newsletter(["check", "--issue", "14"], public, project)
        assert "base_url" not in checked.out


@pytest.mark.slow
async def test_a_send_booked_for_later_is_refused_as_the_send_would_be(project: Path) -> None:
    env = environment(9, NEWSLETTER_NEWSLETTER__BASE_URL=LOCAL)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    at = ["--at", f"{later:%Y-%m-%d} 09:00", "--timezone", "UTC"]
    booked = await newsletter(["send", "--issue", "14", *at, "--yes"], env, project)
    assert booked.code == 1, booked.out + booked.err
    assert "is not scheduled" in booked.err
    assert f"[newsletter] base_url is {LOCAL}" in booked.err
    status = await newsletter(["schedule"], env, project)
    assert "14" not in status.out


@pytest.mark.slow
async def test_check_notes_it_and_a_project_init_just_made_still_passes_its_ci_check(
    tmp_path: Path,
) -> None:
    root = tmp_path / "letter"
    made = CliRunner().invoke(cli, ["init", str(root), "--yes"])
    assert made.exit_code == 0, made.output
    (root / "subscribers.csv").write_text("email,name\nann@example.com,Ann\n", encoding="utf-8")
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        del env["NEWSLETTER_SECRET"]  # init's own .newsletter/secret
        # What the generated workflow runs on a changed issue.
        ci = await newsletter(["check", "--issue", "1", "--format", "github"], env, root)
        assert ci.code == 0, ci.out + ci.err
        assert "::error" not in ci.out
        assert "::warning" not in ci.out  # the warnings it had before: none on issue 1
        text = await newsletter(["check", "--issue", "1"], env, root)
        assert text.code == 0, text.err
        assert (
            f"note: [newsletter] base_url is {LOCAL}: 127.0.0.1 is this machine (loopback)"
            in text.out
        )
        assert "`send --list main` refuses it (--force overrides)" in text.out
        assert "issue 1: 0 error(s), 0 warning(s)" in text.out

        staging = await newsletter(["send", "--issue", "1", "--list", "staging"], env, root)
        assert staging.code == 0, staging.err
        main = await newsletter(["send", "--issue", "1", "--yes"], env, root)
    assert main.code == 1, main.err
    assert f"[newsletter] base_url is {LOCAL}" in main.err
    assert list(handler.by_recipient) == ["editor@example.org"]  # the test send only
