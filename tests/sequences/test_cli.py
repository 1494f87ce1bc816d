"""`newsletter sequences` through click's CliRunner: the list of sequences with readers at each
step and the log per step, `enrol` of a list's readers, a step's test send to a staging list
(again at each call; a real list refused), and a faulty step named at its line."""

from __future__ import annotations

import email
import email.policy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from newsletter.cli.main import cli
from newsletter.database import open_database
from support.sendcli import environment, newsletter
from support.sequences import SECRET, confirmed, welcome, write_step
from support.smtp import FaultyHandler, start


def run(project: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), "sequences", *args],
        env={"NEWSLETTER_SECRET": SECRET},
    )


def test_enrol_then_the_list_shows_readers_waiting_for_step_one(project: Path) -> None:
    welcome(project, second="2d")
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        for address in ("ann@example.org", "bob@example.org"):
            confirmed(database, address)
    enrolled = run(project, "enrol", "welcome", "--list", "main")
    assert enrolled.exit_code == 0, enrolled.output
    assert "2 reader(s) of main joined welcome" in enrolled.output
    again = run(project, "enrol", "welcome", "--list", "main")
    assert "0 reader(s) of main joined welcome" in again.output  # they stay where they are
    shown = run(project)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "welcome (new readers of main; 2 joined, 2 of them with no step yet)"
    assert "01-hello  Hello  after 0 s from the previous step;" in lines[1]
    assert "waiting 2, next due" in lines[1]
    assert "02-tips  Tips  after 2.0 days from the previous step;" in lines[2]
    assert "waiting 0, none waiting; log: none yet" in lines[2]


def test_a_faulty_step_is_named_at_its_line_without_a_traceback(project: Path) -> None:
    welcome(project)
    write_step(project, "welcome", "03-x", after="often", title="X")
    shown = run(project)
    assert shown.exit_code == 1
    assert "03-x.md:3: after: is 'often'" in shown.output
    assert "Traceback" not in shown.output


def test_enrol_in_a_missing_sequence_or_list_is_refused(project: Path) -> None:
    welcome(project)
    missing = run(project, "enrol", "nope", "--list", "main")
    assert missing.exit_code == 1
    assert "no such sequence (sequences: welcome)" in missing.output
    no_list = run(project, "enrol", "welcome", "--list", "nope")
    assert no_list.exit_code == 1
    assert "no list named 'nope'" in no_list.output


@pytest.mark.slow
async def test_a_step_test_goes_to_a_staging_list_each_time_and_never_to_a_real_one(
    project: Path,
) -> None:
    """As a process: a send sets its signal handlers, which only the main thread may."""
    welcome(project)
    handler = FaultyHandler()
    step = ["sequences", "test", "welcome", "--step", "2", "--list"]
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_SECRET=SECRET)
        first = await newsletter([*step, "staging"], env, project)
        assert first.code == 0, first.err
        sent = len(handler.received)
        assert sent == 2  # staging.example.csv
        again = await newsletter([*step, "staging"], env, project)
        assert again.code == 0, again.err
        refused = await newsletter([*step, "main"], env, project)
    assert len(handler.received) == 2 * sent
    subject = email.message_from_bytes(handler.received[0].data, policy=email.policy.default)
    assert str(subject["Subject"]).endswith("Tips")
    assert f"welcome step 2 -> staging: {sent} sent" in again.out
    assert refused.code == 1
    assert "'main' is not a staging list" in refused.err
    # The tests are the editor's, counted apart: no reader has had step 2.
    (_, _, tips) = run(project).output.splitlines()
    assert tips.endswith(f"log: none yet; tests on staging lists: {sent} sent")


def test_check_runs_the_issue_checks_on_every_step(project: Path) -> None:
    welcome(project)
    write_step(
        project, "welcome", "03-pic", after="1d", title="Pic", body="![](https://example.org/a.png)"
    )
    checked = run(project, "check", "welcome")
    lines = checked.output.splitlines()
    assert "welcome/01-hello: 0 finding(s)" in lines
    assert "welcome/03-pic: 2 finding(s)" in lines
    assert "sequences/welcome/03-pic.md:5: an image has no alt text" in checked.output
    assert checked.exit_code == 0  # warnings only
    strict = CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), "sequences", "check", "welcome"],
        env={"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_CHECK__ALT_TEXT": "error"},
    )
    assert strict.exit_code == 1
    assert "1 error(s): fix them before readers join" in strict.output


@pytest.mark.slow
def test_a_readers_record_shows_their_sequences(project: Path) -> None:
    """Art. 15: what is kept about a person includes their place in each sequence."""
    welcome(project)
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        confirmed(database, "ann@example.org")
    run(project, "enrol", "welcome", "--list", "main")
    config = ["--config", str(project / "newsletter.toml"), "subscribers", "show"]
    shown = CliRunner().invoke(cli, [*config, "ann@example.org"], env={"NEWSLETTER_SECRET": SECRET})
    assert "  sequence welcome on main: step 0 (joined " in shown.output
    record = CliRunner().invoke(
        cli, [*config, "ann@example.org", "--json"], env={"NEWSLETTER_SECRET": SECRET}
    )
    (place,) = json.loads(record.output)["sequences"]
    assert (place["sequence"], place["list"], place["last_step"]) == ("welcome", "main", 0)
