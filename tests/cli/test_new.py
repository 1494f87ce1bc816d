"""`newsletter new` as an editor runs it (issue 21.4): the next issue file, in the last one's
format, with its sections emptied; it loads and `check` passes it; a taken number, nothing to
start from and a broken last issue are each one clear error and exit 1."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import zoneinfo
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.errors import IssueError
from newsletter.issues import load_issue_file
from newsletter.issues.skeleton import start_issue, write_skeleton
from support.weeklies import ENGLISH, add_weekly, weekly_environ


def run(*args: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=environ)
    return result.exit_code, result.stdout, result.stderr


def today(zone: str) -> set[dt.date]:
    """The date there now, and a moment later: a test that runs across midnight still holds."""
    return {dt.datetime.now(zoneinfo.ZoneInfo(zone)).date() + dt.timedelta(days=d) for d in (0, 1)}


@pytest.mark.slow
def test_new_writes_the_next_yaml_issue_with_the_sections_emptied(project: Path) -> None:
    environ = {"NEWSLETTER_NEWSLETTER__TIMEZONE": "Asia/Shanghai"}
    code, out, err = run("new", environ=environ)
    assert code == 0, err
    assert out == "issues/15.yaml\n"
    assert (
        err == "issue 15: the 2 section(s) of issue 14 (issues/14.yaml), with nothing in them yet\n"
    )
    text = (project / "issues" / "15.yaml").read_text(encoding="utf-8")
    day = text.splitlines()[2].removeprefix("date: ")
    assert dt.date.fromisoformat(day) in today("Asia/Shanghai")
    assert text == (
        "number: 15\n"
        "title: AI系统内容推荐第15期\n"
        f"date: {day}\n"
        "sections:\n"
        "  - title: 项目\n"
        "    items: []\n"
        "  - title: 分析\n"
        "    items: []\n"
    )
    issue = load_issue_file(project / "issues" / "15.yaml")
    assert [str(s.title) for s in issue.sections] == ["项目", "分析"]
    # A fresh skeleton passes `check`, with one line saying it is still empty.
    code, out, _ = run("check", "--issue", "15", environ=environ)
    assert code == 0
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    [warning] = [line for line in warnings if not line.endswith("[list]")]  # the example list
    assert warning == (
        "warning: all 2 sections are still empty (1 「项目」, 2 「分析」): the issue has no "
        "text yet [empty-section]"
    )
    assert out.splitlines()[-1] == "issue 15: 0 error(s), 2 warning(s)"  # one: the list's rows


@pytest.mark.slow
def test_new_follows_a_markdown_weekly_keeping_each_title_as_written(project: Path) -> None:
    path = add_weekly(project, ENGLISH)
    environ = weekly_environ(ENGLISH)
    last = load_issue_file(path)
    code, out, err = run("new", environ=environ)
    assert code == 0, err
    assert out == "issues/581.md\n"
    new = project / "issues" / "581.md"
    text = new.read_text(encoding="utf-8")
    assert text.startswith("---\nnumber: 581\ntitle: The Crab Post 581\ndate: ")
    # The "# Quote of the week" above a last section is a ## like the others.
    assert "\n## Quote of the week\n" in text
    issue = load_issue_file(new)
    assert [s.title for s in issue.sections] == [s.title for s in last.sections]
    assert all(not s.items and not s.intro for s in issue.sections)
    assert issue.intro == ()
    assert issue.cover is None
    assert issue.silence == ()
    code, out, _ = run("check", "--issue", "581", environ=environ)
    assert code == 0
    assert out.splitlines()[-1] == "issue 581: 0 error(s), 2 warning(s)"  # one: the list's rows
    assert out.splitlines()[0].startswith("warning: all 30 sections are still empty (1 “Official”")


def test_the_date_is_the_newsletters_in_its_timezone(project: Path) -> None:
    # 25 hours apart: on every day of the year the two dates differ.
    dates = []
    for number, zone in ((20, "Pacific/Kiritimati"), (21, "Pacific/Pago_Pago")):
        environ = {"NEWSLETTER_NEWSLETTER__TIMEZONE": zone}
        code, _, err = run("new", "--number", str(number), "--from", "14", environ=environ)
        assert code == 0, err
        day = load_issue_file(project / "issues" / f"{number}.yaml").date
        assert day in today(zone)
        dates.append(day)
    assert dates[0] != dates[1]


def test_number_and_from_override(project: Path) -> None:
    add_weekly(project, ENGLISH)
    code, out, err = run("new", "--number", "30", "--from", "14")
    assert code == 0, err
    assert out == "issues/30.yaml\n"  # the format of the issue it starts from
    issue = load_issue_file(project / "issues" / "30.yaml")
    assert (issue.number, issue.title) == (30, "AI系统内容推荐第30期")


def test_section_titles_that_need_quoting_or_carry_markup_come_back_as_written(
    project: Path,
) -> None:
    titles = ["Rust 1.84: released", "`cargo` news", "[Links](https://x.example/)", "yes", "#1"]
    sections = "".join(f"  - title: '{t}'\n    items: [{{title: a}}]\n" for t in titles)
    (project / "issues" / "16.yaml").write_text(
        f"number: 16\ntitle: Weekly sixteen\nsilence: [bidi]\nsections:\n{sections}",
        encoding="utf-8",
    )
    code, _, err = run("new")
    assert code == 0, err
    issue = load_issue_file(project / "issues" / "17.yaml")
    last = load_issue_file(project / "issues" / "16.yaml")
    assert [s.title for s in issue.sections] == [s.title for s in last.sections]
    assert issue.sections[2].title.links == ["https://x.example/"]
    # No number in the last title: the newsletter's name and the new number.
    assert issue.title == "AI系统内容推荐第17期"
    assert issue.silence == ()  # a silence judged one issue, not the next


def test_a_number_that_exists_is_an_error_never_an_overwrite(project: Path) -> None:
    add_weekly(project, ENGLISH)
    before = (project / "issues" / "14.yaml").read_bytes()
    for number, existing in (("14", "14.yaml"), ("580", "580.md")):
        # 580 exists as Markdown though issue 14, a YAML file, is the one started from.
        code, out, err = run("new", "--number", number, "--from", "14")
        assert (code, out) == (1, "")
        assert err.splitlines() == [
            f"error: issues/{existing}: issue {number} exists already",
            f"hint: `newsletter new` never overwrites an issue: edit issues/{existing}, or give "
            "another --number.",
        ]
    assert (project / "issues" / "14.yaml").read_bytes() == before
    assert not (project / "issues" / "580.yaml").exists()


def test_no_issue_to_start_from_is_a_clear_error(project: Path) -> None:
    (project / "issues" / "14.yaml").unlink()
    code, out, err = run("new")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: issues: has no issue to start from",
        'hint: Write the first issue by hand (the manual, "Issue files"): `newsletter new` starts '
        "each next one from the last.",
    ]
    code, _, err = run("new", "--from", "3")
    assert code == 1
    assert err.splitlines() == [
        "error: issues/3.md: no such issue (issues: none)",
        "hint: Give --from the number of a listed issue to take its sections.",
    ]
    assert list((project / "issues").iterdir()) == []


def test_a_broken_last_issue_is_reported_with_its_lines(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace("title: 项目", "titel: 项目"), encoding="utf-8"
    )
    code, out, err = run("new")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: issues/14.yaml:7: sections[0].title: is required",
        "issues/14.yaml:7: sections[0].titel: is not a known field (check its spelling)",
        "hint: `newsletter new` starts from issue 14's sections: fix the lines named above, or "
        "start from another issue with --from N.",
    ]
    path.write_bytes(b"number: 14\ntitle: \xff\n")
    code, _, err = run("new")
    assert code == 1
    assert (
        err.splitlines()[0] == "error: issues/14.yaml:2: is not valid UTF-8; save the file as UTF-8"
    )
    assert not (project / "issues" / "15.yaml").exists()


def test_a_timezone_that_does_not_exist_is_a_config_error(project: Path) -> None:
    code, _, err = run("new", environ={"NEWSLETTER_NEWSLETTER__TIMEZONE": "Asia/Beijing"})
    assert code == 1
    assert "'Asia/Beijing' is not a time zone such as Asia/Shanghai or Europe/Berlin" in err
    assert not (project / "issues" / "15.yaml").exists()


@pytest.mark.slow
def test_the_console_script_prints_only_the_path(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "newsletter", "new"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NEWSLETTER_NEWSLETTER__TIMEZONE": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "issues/15.yaml\n"  # for `$EDITOR "$(newsletter new)"`
    written = load_issue_file(project / "issues" / "15.yaml")
    assert written.date in {dt.date.today(), dt.date.today() + dt.timedelta(days=1)}


def test_a_file_made_meanwhile_is_not_overwritten(project: Path) -> None:
    skeleton = start_issue(project / "issues", dt.date(2026, 3, 11), name="N", language="zh-CN")
    skeleton.path.write_text("the editor's own\n", encoding="utf-8")
    with pytest.raises(IssueError, match=r"^issues/15\.yaml: exists already$"):
        write_skeleton(skeleton)
    assert skeleton.path.read_text(encoding="utf-8") == "the editor's own\n"


@pytest.mark.parametrize(
    ("last", "expected"),
    [
        ("Weekly 16: Rust in the kernel", "Weekly 17"),
        ("AI系统内容推荐第16期｜大模型的一周", "AI系统内容推荐第17期"),
        ("The Crab Post 16 — async everywhere", "The Crab Post 17"),
        ("Async everywhere - Weekly 16", "Weekly 17"),
        ("Issue 16 of the Crab Post", "Issue 17 of the Crab Post"),
    ],
)
def test_last_weeks_subtitle_is_not_copied_into_the_new_title(
    project: Path, last: str, expected: str
) -> None:
    # Issue 41: `new` after "Weekly 16: Rust in the kernel" titled the next "Weekly 17: Rust in
    # the kernel"; the subtitle was that week's.
    (project / "issues" / "16.yaml").write_text(
        f"number: 16\ntitle: '{last}'\nsections:\n  - title: News\n    items: [{{title: a}}]\n",
        encoding="utf-8",
    )
    code, out, err = run("new")
    assert (code, out) == (0, "issues/17.yaml\n"), err
    assert load_issue_file(project / "issues" / "17.yaml").title == expected
