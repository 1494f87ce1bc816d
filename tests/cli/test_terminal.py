"""Mistakes with paths and the environment end in one error line and exit 1, never a traceback."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "path"),
    [
        # issue 13.7: each of these was a FileNotFoundError traceback.
        (["build", "--issue", "14", "--out", "/proc/x"], "/proc/x"),
        (["send", "--issue", "14", "--dry-run", "--out", "/proc/x"], "/proc/x"),
        (["build", "--site", "/proc/x"], "/proc/x"),
        (["status", "--issue", "14", "--csv", "/nonexistent/dir/x.csv"], "/nonexistent/dir/x.csv"),
    ],
)
def test_a_path_that_cannot_be_written_is_one_error_line(
    project: Path, args: list[str], path: str
) -> None:
    # status only writes its CSV once there is a delivery log.
    assert run("unsubscribe", "someone@example.org", "--list", "main")[0] == 0
    code, _, err = run(*args)
    assert code == 1
    assert err.splitlines()[-2:] == [
        f"error: {path}: No such file or directory",
        "hint: Check the path: its folder must exist and be yours to write in.",
    ]


@pytest.mark.parametrize("var", ["NEWSLETTER_SECRET", "NEWSLETTER_SMTP_PASSWORD"])
@pytest.mark.slow
def test_a_secret_that_is_not_utf8_is_named_not_printed(project: Path, var: str) -> None:
    # issue 13.7: a non-UTF-8 byte in a secret was a UnicodeEncodeError traceback.
    env = {k.encode(): v.encode() for k, v in os.environ.items() if not k.startswith("NEWSLETTER")}
    env[var.encode()] = b"s3cr\xffet-value-long-enough"
    result = subprocess.run(
        [sys.executable, "-m", "newsletter", "build", "--issue", "14"],
        env=env,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 1
    err = result.stderr.decode("utf-8", "replace")
    assert f"error: {var}: the value is not valid UTF-8 text" in err
    assert "Traceback" not in err
    assert b"s3cr" not in result.stderr + result.stdout


def test_status_of_a_list_that_does_not_exist_is_an_error(project: Path) -> None:
    # issue 13.10: `status --list nolist` printed 0 recipients and exited 0.
    for _ in range(2):  # without a delivery log, then with one
        code, out, err = run("status", "--issue", "14", "--list", "nolist")
        assert code == 1
        assert out == ""
        assert "error: no list named 'nolist' in the config (lists: main, staging)" in err
        run("unsubscribe", "someone@example.org", "--list", "main")
    code, out, _ = run("status", "--issue", "14", "--list", "staging")
    assert code == 0
    assert out.startswith("issue 14 -> staging: 0 recipients\n")


def test_status_of_an_issue_that_does_not_exist_is_an_error(project: Path) -> None:
    # issue 41: `status --issue 7` printed "nothing sent yet" and exited 0 for a mistyped number.
    for _ in range(2):  # without a delivery log, then with one
        code, out, err = run("status", "--issue", "7")
        assert code == 1
        assert out == ""
        assert err.splitlines() == [
            "error: issues/7.yaml: no such issue (issues: 14)",
            "hint: Create issues/7.yaml or pick a listed issue.",
        ]
        run("unsubscribe", "someone@example.org", "--list", "main")
    # An issue whose file has gone still has its log: its status is shown, not refused.
    at = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    assert run("send", "--issue", "14", "--at", at, "--timezone", "UTC", "--yes")[0] == 0
    (project / "issues" / "14.yaml").unlink()
    code, out, err = run("status", "--issue", "14")
    assert code == 0, err
    assert out.startswith("issue 14: nothing sent yet\nissue 14 -> main: scheduled for ")
