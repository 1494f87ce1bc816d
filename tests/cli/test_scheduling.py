"""`send --at`, `schedule` and `schedule cancel` on the command line: a booking says when in its
zone and UTC; every bad input is one error line and an exit code, never a traceback."""

from __future__ import annotations

import datetime as dt
import getpass
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.database import open_database
from newsletter.database.schedules import ScheduleState


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result.exit_code, result.stdout, result.stderr


def ahead(hours: float) -> str:
    """A time `hours` from now on Shanghai's clock (UTC+8 all year)."""
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(hours=hours)
    return moment.astimezone(dt.timezone(dt.timedelta(hours=8))).strftime("%Y-%m-%d %H:%M")


def schedules(project: Path) -> list[tuple[int, str, ScheduleState]]:
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        rows = database.schedules.listing()
    return [(r.issue, r.list, r.state) for r in rows]


@pytest.mark.slow
def test_a_booking_says_when_in_its_zone_and_in_utc(project: Path) -> None:
    at = ahead(20)
    code, out, err = run(
        "send", "--issue", "14", "--at", at, "--timezone", "Asia/Shanghai", "--yes"
    )
    assert code == 0, err
    assert f"scheduled: issue 14 -> main at {at} +08:00 (Asia/Shanghai)" in out
    assert " UTC (in 20" in out  # "in 20.0 h" or "in 19.9 h"
    assert "[duplicate-url]" in out  # check's warning, shown, not refused
    assert schedules(project) == [(14, "main", ScheduleState.DUE)]
    code, listing, _ = run("schedule")
    assert code == 0
    assert f"issue 14 -> main  {at} +08:00 (Asia/Shanghai)" in listing
    assert "  due  (booked by " in listing


@pytest.mark.slow
def test_the_zone_defaults_to_the_newsletters(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEWSLETTER_NEWSLETTER__TIMEZONE", "Asia/Shanghai")
    at = ahead(5)
    code, out, err = run("send", "--issue", "14", "--list", "staging", "--at", at)
    assert code == 0, err  # a staging list asks nothing
    assert "+08:00 (Asia/Shanghai)" in out


def test_a_real_list_needs_yes_without_a_terminal(project: Path) -> None:
    code, _, err = run("send", "--issue", "14", "--at", ahead(5))
    assert code == 1
    assert "refusing to schedule issue 14 to the 'main' list without confirmation" in err
    assert schedules(project) == []


@pytest.mark.parametrize(
    ("at", "zone", "expected"),
    [
        ("2020-01-01 08:00", "Asia/Shanghai", "error: --at: 2020-01-01 08:00 +08:00"),
        ("2027-03-28 02:30", "Europe/Berlin", "does not happen in Europe/Berlin"),
        ("2027-10-31 02:30", "Europe/Berlin", "happens twice in Europe/Berlin"),
        ("2027-12-02 08:00", "Asia/Beijing", "'Asia/Beijing' is not a time zone"),
        ("tomorrow 8am", "Asia/Shanghai", "not a time this command reads"),
        ("2027-02-29 08:00", "UTC", "day is out of range for month"),
        # Where the calendar ends: once an OverflowError's traceback.
        ("9999-12-31 23:59 -23:59", "UTC", "9999-12-31 23:59 is more than 366 days ahead"),
        ("9999-12-31 23:00", "America/New_York", "9999-12-31 23:00 is more than 366 days ahead"),
        ("2099-01-01 08:00", "UTC", "2099-01-01 08:00 UTC is more than 366 days ahead"),
        ("0001-01-01 00:00 +05:00", "UTC", "0001-01-01 00:00 is long past"),
    ],
)
def test_a_bad_time_or_zone_is_one_error(project: Path, at: str, zone: str, expected: str) -> None:
    code, out, err = run("send", "--issue", "14", "--at", at, "--timezone", zone, "--yes")
    assert code == 1, out
    assert expected in err
    assert err.count("error:") == 1
    assert "hint:" in err
    assert "Traceback" not in err
    assert not (project / ".newsletter" / "outbox.sqlite3").exists() or not schedules(project)


def test_the_past_error_says_how_long_ago(project: Path) -> None:
    _, _, err = run(
        "send", "--issue", "14", "--at", "2020-01-01 08:00", "--timezone", "UTC", "--yes"
    )
    assert "2020-01-01 08:00 UTC was " in err
    assert "days ago" in err
    assert "Give a time in the future" in err


@pytest.mark.slow
def test_an_issue_that_fails_check_is_not_scheduled(project: Path) -> None:
    # The template leaves its own code in every email (an issue's `{{` is only text).
    path = project / "templates" / "email" / "issue.txt"
    path.write_text(
        path.read_text(encoding="utf-8") + "{% raw %}{{ name }}{% endraw %}\n", encoding="utf-8"
    )
    code, _, err = run("send", "--issue", "14", "--at", ahead(3), "--yes")
    assert code == 1
    assert "issue 14 fails `newsletter check`, so it is not scheduled" in err
    assert "[markers]" in err
    assert not (project / ".newsletter" / "outbox.sqlite3").exists() or not schedules(project)


def test_an_issue_or_list_that_is_not_there(project: Path) -> None:
    code, _, err = run("send", "--issue", "99", "--at", ahead(3), "--yes")
    assert code == 1
    assert "99" in err
    assert "Traceback" not in err
    code, _, err = run("send", "--issue", "14", "--list", "nope", "--at", ahead(3), "--yes")
    assert code == 1
    assert "no list named 'nope'" in err


@pytest.mark.slow
def test_a_second_schedule_of_the_same_send_is_refused(project: Path) -> None:
    assert run("send", "--issue", "14", "--at", ahead(3), "--yes")[0] == 0
    code, _, err = run("send", "--issue", "14", "--at", ahead(4), "--yes")
    assert code == 1
    assert "issue 14 to 'main' is already scheduled (due, " in err
    assert "newsletter schedule cancel --issue 14 --list main" in err
    # Another list is another send.
    assert run("send", "--issue", "14", "--list", "staging", "--at", ahead(4))[0] == 0
    assert len(schedules(project)) == 2


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--dry-run"], "--at and --dry-run do not go together"),
        (["--out", "x"], "--out is for --dry-run, which does not go with --at"),
        (["--processes", "2"], "--processes is not kept for a scheduled send: the worker's"),
        (["--resend-unknown"], "--resend-unknown is not kept for a scheduled send: it acts on"),
        (["--retry-failed"], "--retry-failed is not kept for a scheduled send: it retries"),
        (["--rate", "5", "--processes", "2"], "--processes is not kept"),
    ],
)
def test_options_that_do_not_go_with_at(project: Path, extra: list[str], expected: str) -> None:
    code, _, err = run("send", "--issue", "14", "--at", ahead(3), "--yes", *extra)
    assert code == 2
    assert expected in err
    assert not (project / ".newsletter" / "outbox.sqlite3").exists()


@pytest.mark.slow
def test_rate_and_concurrency_are_kept_with_the_schedule(project: Path) -> None:
    at = ahead(3)
    code, out, err = run(
        "send", "--issue", "14", "--at", at, "--yes", "--rate", "2.5", "--concurrency", "3"
    )
    assert code == 0, err
    assert out.splitlines()[-1].endswith(", sent with --rate 2.5 --concurrency 3")
    code, out, err = run("send", "--issue", "14", "--list", "staging", "--at", at, "--rate", "0")
    assert code == 0, err
    assert out.splitlines()[-1].endswith(", sent with --rate 0")  # 0: unlimited, kept as asked
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        kept = {s.list: (s.rate, s.concurrency) for s in database.schedules.listing()}
    assert kept == {"main": (2.5, 3), "staging": (0.0, None)}
    _, listing, _ = run("schedule")
    assert "  due  (booked by " in listing
    assert "; sent with --rate 2.5 --concurrency 3)" in listing
    assert "; sent with --rate 0)" in listing
    code, _, err = run("send", "--issue", "14", "--at", ahead(4), "--yes", "--concurrency", "0")
    assert code == 2
    assert "--concurrency" in err  # send's own range check applies to a scheduled send too


@pytest.mark.slow
def test_today_and_tomorrow_in_the_schedules_zone(project: Path) -> None:
    shanghai = dt.timezone(dt.timedelta(hours=8))  # Asia/Shanghai, UTC+8 all year
    now = dt.datetime.now(shanghai)
    code, out, err = run(
        "send",
        "--issue",
        "14",
        "--at",
        f"tomorrow {now:%H:%M}",
        "--timezone",
        "Asia/Shanghai",
        "--yes",
    )
    assert code == 0, err
    tomorrow = now.date() + dt.timedelta(days=1)
    assert f"scheduled: issue 14 -> main at {tomorrow} {now:%H:%M} +08:00 (Asia/Shanghai)" in out
    earlier = now - dt.timedelta(minutes=5)
    if earlier.date() == now.date():  # not across midnight
        code, _, err = run(
            "send",
            "--issue",
            "14",
            "--list",
            "staging",
            "--at",
            f"today {earlier:%H:%M}",
            "--timezone",
            "Asia/Shanghai",
        )
        assert code == 1
        assert f"error: --at: {now.date()} {earlier:%H:%M} +08:00 (Asia/Shanghai)" in err
        assert "Give a time in the future" in err


def test_timezone_without_at(project: Path) -> None:
    code, _, err = run("send", "--issue", "14", "--timezone", "UTC", "--yes")
    assert code == 2
    assert "give --at TIME with it" in err


@pytest.mark.slow
def test_cancel_cancels_what_waits_and_says_when_nothing_does(project: Path) -> None:
    assert run("send", "--issue", "14", "--at", ahead(3), "--yes")[0] == 0
    assert run("send", "--issue", "14", "--list", "staging", "--at", ahead(3))[0] == 0
    code, out, err = run("schedule", "cancel", "--issue", "14", "--list", "main")
    assert code == 0, err
    assert out.startswith("cancelled: issue 14 -> main (")
    assert sorted(schedules(project)) == [
        (14, "main", ScheduleState.CANCELLED),
        (14, "staging", ScheduleState.DUE),
    ]
    code, _, err = run("schedule", "cancel", "--issue", "14", "--list", "main")
    assert code == 1
    assert "issue 14 to 'main' has no scheduled send waiting to be cancelled" in err
    # Cancelled, the send may be booked again.
    assert run("send", "--issue", "14", "--at", ahead(6), "--yes")[0] == 0
    _, listing, _ = run("schedule", "--issue", "14")
    assert listing.index("  due  ") < listing.index("  cancelled  ")
    assert "    cancelled by " in listing


def test_schedule_with_no_outbox(project: Path) -> None:
    assert run("schedule") == (0, "no scheduled sends (no outbox yet)\n", "")
    code, _, err = run("schedule", "cancel", "--issue", "14")
    assert code == 1
    assert "no scheduled send" in err


@pytest.mark.slow
def test_status_shows_the_issues_scheduled_sends_and_those_that_did_not_go(
    project: Path,
) -> None:
    at = ahead(20)
    assert run("send", "--issue", "14", "--at", at, "--timezone", "Asia/Shanghai", "--yes")[0] == 0
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        store = database.schedules
        now = dt.datetime.now(dt.UTC).timestamp()
        assert store.book(14, "staging", now - 7 * 3600, "Europe/Berlin", "bob@desk")
        store.miss(6 * 3600, "not sent: no worker ran within [schedule] grace (6.0 h)")
        old = store.book(14, "vip", now - 9 * 86_400, "UTC", "t")
        assert old is not None
        assert store.claim("w", 30) is not None
        assert store.finish(old.id, "w", ScheduleState.FAILED, "not sent: long ago")
        database.backend.run(
            "UPDATE schedules SET finished_at = ? WHERE id = ?",
            ((dt.datetime.now(dt.UTC) - dt.timedelta(days=8)).isoformat(), old.id),
        )
        assert store.book(15, "main", now + 3600, "UTC", "t")  # another issue's
    code, out, err = run("status", "--issue", "14")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "issue 14: nothing sent yet"
    (due,) = [line for line in lines if "-> main: scheduled for" in line]
    assert due.startswith(f"issue 14 -> main: scheduled for {at} +08:00 (Asia/Shanghai), ")
    assert " UTC (in 2" in due  # in 20.0 h, or 19.9 h
    booked = dt.datetime.now(dt.timezone(dt.timedelta(hours=8)))
    assert f": due, booked by {getpass.getuser()}@" in due
    assert f" on {booked:%Y-%m-%d} " in due
    assert due.endswith(" +08:00")
    missed = lines.index(next(line for line in lines if "-> staging: scheduled for" in line))
    assert "(Europe/Berlin)" in lines[missed]
    assert lines[missed].endswith(": missed")
    assert lines[missed + 1] == "    not sent: no worker ran within [schedule] grace (6.0 h)"
    assert "vip" not in out  # failed more than a week ago
    assert "issue 15" not in out
    assert len(lines) == 4, out
