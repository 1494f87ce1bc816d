"""`newsletter subscribers` and `newsletter send --dry-run`: messages, files and exit codes."""

from __future__ import annotations

import email
import email.policy
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from newsletter.cli.main import cli
from newsletter.config.settings import Settings
from newsletter.database import database_exists, open_database
from newsletter.mail.tokens import verify

SECRET = "cli-test-secret-0123456789abcdef"


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        cli, ["--config", str(project / "newsletter.toml"), *args], env=env or {}
    )


def test_subscribers_reports_rejected_rows_and_exits_1(project: Path) -> None:
    result = run(project, "subscribers")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "subscribers.example.csv:8: email: 'ALICE@EXAMPLE.NET' duplicates line 4 "
        "(addresses compare case-insensitively)"
    )
    assert lines[1].startswith("subscribers.example.csv:9: email: 'not-an-address'")
    assert (
        "main (subscribers.example.csv): 5 valid, 1 duplicate, 1 invalid, 1 unsubscribed, "
        "0 suppressed" in lines
    )
    assert "staging (staging.example.csv): 2 valid" in result.output
    assert "2 row(s) rejected" in result.output


def test_subscribers_of_a_clean_list_exit_0(project: Path) -> None:
    result = run(project, "subscribers", "--list", "staging")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "staging (staging.example.csv): 2 valid, 0 duplicate, 0 invalid, 0 unsubscribed, "
        "0 suppressed"
    )


def test_hostile_list_is_reported_row_by_row(project: Path) -> None:
    (project / "hostile.csv").write_bytes(
        b"\xef\xbb\xbfemail,name\r\n"
        b'a@example.com,"Evil\r\nBcc: victim@example.com"\r\n'
        b"b@example.com,=?UTF-8?Q?=0A?=Bcc: x@example.com\r\n"
        b"c@example.com,Nul\x00\r\n"
        b"C@EXAMPLE.COM,first valid row for c\r\n"
        b"c@example.com,dup\r\n"
        b"d@\xe4\xbe\x8b\xe5\xad\x90.\xe5\x85\xac\xe5\x8f\xb8,IDN\r\n"
    )
    result = run(
        project,
        "subscribers",
        "--list",
        "main",
        env={"NEWSLETTER_LISTS__MAIN__PATH": "hostile.csv"},
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert re.search(
        r"^hostile\.csv:2: name: contains the control character U\+000D", result.output, re.M
    )
    assert re.search(r"^hostile\.csv:4: name: .*encoded word", result.output, re.M)
    assert re.search(r"^hostile\.csv:5: name: .*U\+0000", result.output, re.M)
    assert re.search(
        r"^hostile\.csv:7: email: 'c@example.com' duplicates line 6", result.output, re.M
    )
    assert "2 valid, 1 duplicate, 3 invalid" in result.output


def test_suppressed_addresses_are_counted(project: Path, settings: Settings) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with open_database(settings.database_target) as database:
        database.suppressions.add("staging", "Editor@News.Example.org", "test")
    result = run(project, "subscribers", "--list", "staging")
    assert "1 valid, 0 duplicate, 0 invalid, 0 unsubscribed, 1 suppressed" in result.output


def test_unknown_list_and_missing_file_are_clear_errors(project: Path) -> None:
    result = run(project, "subscribers", "--list", "nope")
    assert result.exit_code == 1
    assert "no list named 'nope'" in result.output
    (project / "staging.example.csv").unlink()
    result = run(project, "subscribers", "--list", "staging")
    assert result.exit_code == 1
    assert "staging.example.csv: no such subscriber list" in result.output
    assert "Traceback" not in result.output


def test_dry_run_writes_one_parseable_eml_per_recipient(project: Path, settings: Settings) -> None:
    out = project / "dry"
    result = run(
        project,
        "send",
        "--issue",
        "14",
        "--dry-run",
        "--out",
        str(out),
        env={"NEWSLETTER_SECRET": SECRET},
    )
    assert result.exit_code == 0, result.output
    assert "dry run: wrote 5 message(s)" in result.output
    assert "5 valid, 1 duplicate, 1 invalid, 1 unsubscribed, 0 suppressed" in result.output
    assert "throwaway key" not in result.output
    files = sorted(out.glob("*.eml"))
    assert len(files) == 5
    recipients = []
    for path in files:
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        recipients.append(message["To"].addresses[0].addr_spec)
        token = re.search(r"/unsubscribe/([^>]+)>", message["List-Unsubscribe"])
        assert token is not None
        assert verify(SECRET, token.group(1)) == ("main", recipients[-1].lower())
        assert not message["Subject"].startswith("【测试】")
    assert recipients == [
        "li.lei@example.com",
        "han.meimei@example.org",
        "alice@example.net",
        "bob@example.net",
        "carol@xn--fsqu00a.xn--55qx5d",
    ]
    assert not database_exists(settings.database_target)  # no delivery log


def test_dry_run_to_staging_without_secret(project: Path) -> None:
    result = run(project, "send", "--issue", "14", "--list", "staging", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "NEWSLETTER_SECRET is not set" in result.output
    files = sorted((project / "out" / "14-staging").glob("*.eml"))
    assert len(files) == 2
    message = email.message_from_bytes(files[0].read_bytes(), policy=email.policy.default)
    assert message["Subject"] == "【测试】AI系统内容推荐第14期"
    assert "X-Newsletter-Test" in message


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["send", "--issue", "14", "--out", "x"], 2, "--out is only used with --dry-run"),
        (["send", "--issue", "99", "--dry-run"], 1, "error:"),
        (["send", "--issue", "14", "--list", "nope", "--dry-run"], 1, "no list named 'nope'"),
    ],
)
def test_dry_run_usage_errors(project: Path, args: list[str], code: int, message: str) -> None:
    result = run(project, *args)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_unclosed_quote_costs_one_row_in_the_report_and_the_dry_run(project: Path) -> None:
    # issue 13.1: "0 valid, 1 invalid" and a dry run of 0 messages: b and c had vanished.
    (project / "stray.csv").write_bytes(
        b'email,name\r\na@example.org,"Li Lei\r\nb@example.org,Bob\r\nc@example.org,Carol\r\n'
    )
    env = {"NEWSLETTER_LISTS__MAIN__PATH": "stray.csv"}
    listed = run(project, "subscribers", "--list", "main", env=env)
    assert listed.exit_code == 1
    assert listed.output.splitlines()[:2] == [
        'stray.csv:2: name: opens a double quote (") that is never closed, so every later line '
        'would be read into it; close the quote or remove it (inside quotes, write a quote as "")',
        "main (stray.csv): 2 valid, 0 duplicate, 1 invalid, 0 unsubscribed, 0 suppressed",
    ]
    dry = run(project, "send", "--issue", "14", "--dry-run", "--out", "dry", env=env)
    assert dry.exit_code == 0, dry.output
    assert sorted(p.name.split("-", 1)[1] for p in (project / "dry").glob("*.eml")) == [
        "b@example.org.eml",
        "c@example.org.eml",
    ]


def test_a_line_too_long_is_one_rejected_row_and_the_counts_add_up(project: Path) -> None:
    """A line past MAX_LINE (here 3 MB: a 200 MB one once took 440 MB to read) is named by its
    number and skipped unread; the rows around it are read as usual."""
    from newsletter.formats.csvfile import MAX_LINE

    (project / "long.csv").write_bytes(
        b"email,name\r\na@example.org,A\r\n"
        + b"b@example.org,"
        + b"x" * (MAX_LINE * 48)
        + b"\r\n"
        + b"c@example.org,C\r\n"
    )
    env = {"NEWSLETTER_LISTS__MAIN__PATH": "long.csv"}
    listed = run(project, "subscribers", "--list", "main", env=env)
    assert listed.exit_code == 1
    assert "Traceback" not in listed.output
    assert listed.output.splitlines()[:2] == [
        f"long.csv:3: is longer than {MAX_LINE:,} characters (a subscriber row takes a few "
        "hundred), so it was not read: is this the right file? Shorten the line or remove it",
        "main (long.csv): 2 valid, 0 duplicate, 1 invalid, 0 unsubscribed, 0 suppressed",
    ]


def test_a_utf16_list_is_named_as_such(project: Path) -> None:
    """Saved as UTF-16 without a byte-order mark, a list once lacked "column e?m?a?i?l?"."""
    (project / "wide.csv").write_bytes("email,name\r\na@example.org,A\r\n".encode("utf-16-le"))
    env = {"NEWSLETTER_LISTS__MAIN__PATH": "wide.csv"}
    listed = run(project, "subscribers", "--list", "main", env=env)
    assert listed.exit_code == 1
    assert "Traceback" not in listed.output
    lines = listed.output.splitlines()
    assert "error: wide.csv is not UTF-8 text (it looks like UTF-16): save it as UTF-8" in lines
    assert any(line.startswith("hint: Save it again with the UTF-8 encoding") for line in lines)
