"""`newsletter report` as a user runs it: nothing sent yet, the one list an issue went to chosen
for them, several lists named, an unknown list refused, the HTML and CSV files written, and a
path that cannot be written told in one line."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.outbox import open_outbox
from newsletter.outbox.clicks import ClickRecord, StoredClick
from newsletter.places import Place, Region
from newsletter.settings import load_settings
from support.outbox import plan
from support.tracked import tracked_send

ENV = {"NEWSLETTER_SECRET": "report-tests-secret-0123456789abcdef"}
TRACKED = {**ENV, "NEWSLETTER_TRACKING__CLICKS": "aggregate", "NEWSLETTER_PRIVACY__MIN_COUNT": "2"}


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env or TRACKED)
    return result.exit_code, result.stdout, result.stderr


def sent(project: Path, list_name: str = "main", clicks: int = 3) -> None:
    settings = load_settings(project / "newsletter.toml", environ=TRACKED)
    tracked_send(settings, [f"r{n}@example.com" for n in range(4)], list_name=list_name)
    event = ClickRecord(
        time.time(), Place(Region.TITLE, 0, 0), "GET", False, "browser:edge", "", None, None
    )
    with open_outbox(settings.outbox_target) as outbox:
        outbox.clicks.add(
            [
                StoredClick(14, list_name, event._replace(ip=f"198.51.100.{n}"))
                for n in range(clicks)
            ]
        )


def test_nothing_sent_yet(project: Path) -> None:
    assert run("report", "--issue", "14") == (
        0,
        "issue 14: nothing sent yet (no delivery log)\n",
        "",
    )


def test_the_one_list_it_went_to_and_the_files(project: Path) -> None:
    sent(project)
    code, out, err = run("report", "--issue", "14", "--html", "report.html", "--csv", "report.csv")
    assert code == 0, err
    assert out.startswith("Issue 14 · ")
    assert "list main" in out
    assert "counted per link; nothing about a person is kept" in out
    page = (project / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "<script" not in page
    rows = list(csv.DictReader(io.StringIO((project / "report.csv").read_text(encoding="utf-8"))))
    (first,) = [r for r in rows if r["kind"] == "item" and (r["section"], r["item"]) == ("1", "1")]
    assert first["people"] == "3"
    assert [r["messages"] for r in rows if r["kind"] == "sent"] == ["4"]
    assert "wrote report.html" in err
    assert "rows to report.csv" in err


def test_csv_to_stdout_is_the_csv_alone(project: Path) -> None:
    sent(project)
    code, out, _ = run("report", "--issue", "14", "--csv", "-")
    assert code == 0
    assert out.splitlines()[0] == "kind,section,item,title,people,machines,messages,rate"


def test_several_lists_are_named_and_a_test_send_is_set_apart(project: Path) -> None:
    sent(project, "staging")
    sent(project, "main")
    code, out, _ = run("report", "--issue", "14")
    assert code == 0
    assert "list main" in out  # the staging list's test send is not the send
    settings = load_settings(project / "newsletter.toml", environ=TRACKED)
    with open_outbox(settings.outbox_target) as outbox:
        plan(outbox, 14, "other", ["x@example.com"])
    code, _, err = run("report", "--issue", "14")
    assert code == 1
    assert "error: issue 14 went to 2 lists (main, other)" in err
    assert "hint: Say which with --list" in err
    code, out, _ = run("report", "--issue", "14", "--list", "staging")
    assert (code, "list staging" in out) == (0, True)


def test_an_unknown_list_and_an_unwritable_path_are_one_line_each(project: Path) -> None:
    sent(project)
    code, _, err = run("report", "--issue", "14", "--list", "nope")
    assert code == 1
    assert err.startswith("error: ")
    assert "nope" in err
    code, _, err = run("report", "--issue", "14", "--html", "missing/folder/report.html")
    assert code == 1
    assert "Traceback" not in err
    assert err.startswith("error: ")
