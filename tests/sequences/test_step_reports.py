"""A step's `status` and `report` by its key: the worker's duty sends a step with [tracking]
per-reader, a person's click goes through serve's real redirect and a scanner's HEAD beside
it, and `report --issue KEY` counts the person alone; `status` shows the step's log."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.database import open_database
from newsletter.mail.tokens import signing_key
from newsletter.sequences.duty import SequenceDuty
from support.sequences import confirmed, welcome, write_step
from support.site import running_service
from support.smtp import FaultyHandler, start
from support.tracked import Sent

FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


@pytest.mark.slow
async def test_a_steps_report_counts_a_persons_click_and_not_a_scanners(project: Path) -> None:
    welcome(project)
    body = "Read [the guide](https://example.org/guide) first."
    write_step(project, "welcome", "01-hello", after="0s", title="Hello", lists="main", body=body)
    env = {
        "NEWSLETTER_TRACKING__CLICKS": "per-reader",
        "NEWSLETTER_TRACKING__DELIVERY_WINDOW": "0",
        "NEWSLETTER_SCHEDULE__QUIET_HOURS": "",
        "NEWSLETTER_PRIVACY__MIN_COUNT": "1",
    }
    handler = FaultyHandler()
    with running_service(project, **env) as site:
        target = site.settings.database_target
        with open_database(target) as database:
            ann = confirmed(database, "ann@example.org")
            database.enrolments.join("main", ann, ["welcome"], time.time())
        async with start(handler) as server:
            smtp = site.settings.smtp.model_copy(update={"port": server.port})
            settings = site.settings.model_copy(update={"smtp": smtp})
            duty = SequenceDuty(settings, signing_key(settings, allow_ephemeral=False), "w", print)
            await duty.start()
            try:
                await duty.look()
            finally:
                await duty.stop()
        (message,) = handler.received
        links = Sent("ann@example.org", 0, message.data).html_links()
        guide = [link for link in links if "/r/" in link][1:]  # the canary first
        assert guide
        answers = []
        for link in guide:
            answers.append(
                await asyncio.to_thread(httpx.head, link, headers={"User-Agent": FIREFOX})
            )
            answers.append(
                await asyncio.to_thread(httpx.get, link, headers={"User-Agent": FIREFOX})
            )
        with open_database(target) as database:
            key = database.enrolments.step_key("welcome", 1)
        deadline = time.monotonic() + 60  # a hang guard: the site writes clicks in batches
        while True:
            with open_database(target) as database:
                if len(list(database.clicks.events(key, "main"))) >= len(answers):
                    break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    runner = CliRunner()
    config = ["--config", str(project / "newsletter.toml")]
    shown = runner.invoke(cli, [*config, "report", "--issue", str(key), "--csv", "-"], env=site.env)
    assert shown.exit_code == 0, shown.output
    rows = list(csv.DictReader(io.StringIO(shown.output)))
    assert [r["messages"] for r in rows if r["kind"] == "sent"] == ["1"]
    (intro,) = [r for r in rows if r["kind"] == "intro"]
    assert (intro["people"], intro["machines"]) == ("1", "1")  # the HEAD is a machine's
    status = runner.invoke(cli, [*config, "status", "--issue", str(key)], env=site.env)
    assert status.exit_code == 0, status.output
    assert f"issue {key} -> main: 1 recipients" in status.output
