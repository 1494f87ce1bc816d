"""`newsletter build` and `newsletter check` as a user runs them: messages and exit codes."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import os
import re
import shutil
import socket
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.project import publish_all
from support.weeklies import ENGLISH, add_weekly


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_build_writes_the_three_files(project: Path) -> None:
    code, out, err = run("build", "--issue", "14", "--out", "dist14")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == [
        "dist14/email.html",
        "dist14/email.txt",
        "dist14/email.eml",
    ]
    assert all(line.endswith(" KB") for line in lines[:3])
    assert "NEWSLETTER_SECRET is not set" in err
    message = email.message_from_bytes(
        (project / "dist14" / "email.eml").read_bytes(), policy=email.policy.default
    )
    assert isinstance(message, EmailMessage)
    assert message["To"] == "示例读者 <reader@example.org>"
    html_part = message.get_body(("html",))
    assert html_part is not None
    html = (project / "dist14" / "email.html").read_text(encoding="utf-8")
    assert html == html_part.get_content().replace("\r\n", "\n")
    assert "示例读者，你好！" in html
    assert "__NL_" not in html
    assert "https://news.example.org/unsubscribe/" in html
    text = (project / "dist14" / "email.txt").read_text(encoding="utf-8")
    assert "GPU架构演进十年，从费米到安培" in text


def test_build_defaults_to_out_folder(project: Path) -> None:
    code, _, _ = run("build", "--issue", "14")
    assert code == 0
    assert (project / "out" / "14" / "email.eml").exists()


@pytest.mark.slow
def test_check_passes_issue_14_with_the_duplicate_link_warning(project: Path) -> None:
    code, out, _ = run("check", "--issue", "14")
    assert code == 0
    assert out.splitlines()[0] == (
        "warning: https://arxiv.org/pdf/2110.15032.pdf is linked under 2 items: "
        "「OneFlow：从零重新设计分布式深度学习框架」 and "
        "「高效并行训练AI大模型——“夸父”AI系统 (Colossal-AI)」 in 「项目」 [duplicate-url]"
    )
    assert "HTML part: " in out
    assert "of Gmail's ~102 KB clipping limit" in out
    assert out.splitlines()[-1] == "issue 14: 0 error(s), 2 warning(s)"  # and the list's rows


def test_check_fails_on_a_broken_issue_with_path_line_and_field(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"https://github.com/microsoft/DirectML"', "github.com/x"))
    code, out, err = run("check", "--issue", "14")
    assert code == 1
    assert out == ""
    assert err.splitlines() == [
        "error: issues/14.yaml:40: sections[0].items[4].links[0].url: "
        "must be an absolute http:// or https:// URL",
        "hint: Fix the lines named above and run `newsletter check` again.",
    ]


def test_an_issue_file_too_large_is_refused_unread(project: Path) -> None:
    """Past MAX_ISSUE_BYTES (here 3 MB; parsing 10 MB once took 640 MB) the file is named and
    not parsed."""
    from newsletter.issues.load import MAX_ISSUE_BYTES

    path = project / "issues" / "14.yaml"
    filler = "\n".join(f"# {n:08d} " + "x" * 100 for n in range(MAX_ISSUE_BYTES * 3 // 110))
    path.write_text(path.read_text(encoding="utf-8") + filler + "\n", encoding="utf-8")
    code, out, err = run("check", "--issue", "14")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: issues/14.yaml: is larger than 2 MB, so it was not read (Gmail clips an email "
        "past 102 KB)",
        "hint: Is this the issue file? Keep an issue's text short and link the long pieces.",
    ]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16"])
def test_an_issue_file_saved_as_utf16_is_named_as_such(project: Path, encoding: str) -> None:
    path = project / "issues" / "14.yaml"
    path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))
    code, out, err = run("check", "--issue", "14")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == (
        "error: issues/14.yaml: is not UTF-8 text (it looks like UTF-16): save it as UTF-8"
    )
    assert err.splitlines()[1].startswith("hint: Save it again with the UTF-8 encoding")


@pytest.mark.slow
def test_a_remote_one_pixel_image_is_a_tracking_pixel_warning_at_its_line(
    project: Path,
) -> None:
    path = project / "issues" / "14.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[10].startswith("          【OneFlow")  # item 0's summary, folded (>-)
    pixel = "https://t.example.org/open.gif"
    lines[11:11] = ["", "", f"          ![一像素]({pixel}){{width=1 height=1}}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run("check", "--issue", "14")
    assert code == 0, err
    assert (
        f"warning: issues/14.yaml:14: {pixel} is a 1×1 image, a tracking pixel: each reader's "
        "mail client fetches it, telling its host who opened the email, when and from where; "
        "remove it [tracking-pixel]"
    ) in out.splitlines()
    assert out.splitlines()[-1] == "issue 14: 0 error(s), 3 warning(s)"  # and the list's rows


def test_missing_issue_lists_what_exists(project: Path) -> None:
    code, _, err = run("build", "--issue", "15")
    assert code == 1
    assert "error: issues/15.yaml: no such issue (issues: 14)" in err


def test_a_missing_issue_in_a_markdown_project_is_named_as_its_md_file(project: Path) -> None:
    # Issue 41: a Markdown project's missing issue 3 was reported as issues/3.yaml.
    add_weekly(project, ENGLISH)
    (project / "issues" / "14.yaml").unlink()
    code, _, err = run("check", "--issue", "3")
    assert code == 1
    assert err.splitlines() == [
        "error: issues/3.md: no such issue (issues: 580)",
        "hint: Create issues/3.md or pick a listed issue.",
    ]


def test_check_without_issue_checks_the_newest_and_says_so(project: Path) -> None:
    # Issue 41: `check` with no --issue was a usage error; it takes the newest issue now.
    shutil.copy(project / "issues" / "14.yaml", project / "issues" / "9.yaml")
    (project / "issues" / "9.yaml").write_text(
        (project / "issues" / "9.yaml")
        .read_text(encoding="utf-8")
        .replace("number: 14", "number: 9"),
        encoding="utf-8",
    )
    code, out, err = run("check")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "checking issue 14, the newest (issues/14.yaml); --issue N checks another"
    assert lines[-1].startswith("issue 14: 0 error(s)")
    # A document on stdout stays the document alone: the line goes to stderr with the summary.
    code, out, err = run("check", "--format", "json")
    assert code == 0, err
    assert out.startswith("[") or out.startswith("{")
    assert err.splitlines()[0].startswith("checking issue 14, the newest")


def test_check_without_issue_in_an_empty_project_is_a_clear_error(project: Path) -> None:
    (project / "issues" / "14.yaml").unlink()
    code, _, err = run("check")
    assert code == 1
    assert err.splitlines() == [
        "error: issues: has no issue yet",
        'hint: Write issues/1.md (the manual, "Issue files"), or give --issue N.',
    ]


@pytest.mark.slow
def test_check_errors_when_the_unsubscribe_link_is_gone(project: Path) -> None:
    template = project / "templates" / "email" / "issue.mjml"
    text = template.read_text(encoding="utf-8")
    template.write_text(text.replace("{{ placeholders.unsubscribe_url }}", "https://x.example"))
    code, out, _ = run("check", "--issue", "14")
    assert code == 1
    assert "error: the HTML has no visible unsubscribe link" in out


@pytest.mark.slow
def test_check_warns_on_http_and_errors_on_oversize(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    long_summary = "很长的摘要。" * 6000
    text = text.replace('"https://doi.org/', '"http://doi.org/')
    # In the first item: the email keeps all that fits before a block (issue 42), so only a
    # first block past the clip leaves it with nothing.
    text = text.replace("【OneFlow深度学习框架论文正式公开】", long_summary, 1)
    path.write_text(text, encoding="utf-8")
    code, out, _ = run("check", "--issue", "14")
    assert code == 1
    assert "warning: link http://doi.org/10.1039/D1SC02087K is http, not https [http]" in out
    assert re.search(
        r"error: the section 1 项目 alone takes 1\d\d\.\d KB, past Gmail's ~102 KB clip", out
    )


@pytest.mark.slow
def test_check_passes_an_issue_cut_at_the_clip_and_says_what_went_online(project: Path) -> None:
    # issue 20: past the clip the email ends with the rest online: not an error. Issue 42: it
    # keeps all that fits, the items of section 2 before the long one too.
    text = (project / "issues" / "14.yaml").read_text(encoding="utf-8")
    long_summary = "很长的摘要。" * 3000
    text = text.replace("可以为高通量合成反应的实验人员节省大量的成本和时间。", long_summary)
    text = text.replace("随着软件从1.0进化到2.0", long_summary + "随着软件从1.0进化到2.0")
    (project / "issues" / "14.yaml").write_text(text, encoding="utf-8")
    code, out, _ = run("check", "--issue", "14")
    assert code == 0, out
    assert re.search(
        r"warning: the whole issue would be 1\d\d\.\d KB, past Gmail's ~102 KB clip: the email "
        r"keeps section 1 and section 2 in part: \d+ item\(s\) and ends with a link to the rest "
        r"on the web version \(1 section\(s\): 2 分析\); the text part is whole \[clip\]",
        out,
    )
    assert re.search(r"warning: the sections that cost the most \(of 1\d\d\.\d KB\): 1 项目 ", out)
    assert "spam score 0.0" in out


def test_broken_template_is_a_clear_error(project: Path) -> None:
    (project / "templates" / "email" / "issue.txt").write_text("{% for %}\n", encoding="utf-8")
    code, _, err = run("build", "--issue", "14")
    assert code == 1
    assert err.startswith("error: templates/email/issue.txt:1: ")
    assert "Traceback" not in err


@pytest.mark.slow
def test_console_script_runs_without_traceback(project: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "newsletter", "check", "--issue", "99"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "no such issue (issues: 14)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_check_prints_the_spam_score(project: Path) -> None:
    if shutil.which("spamassassin") is None and os.environ.get("CI") != "true":
        pytest.skip("spamassassin is not installed (apt-get install spamassassin)")
    code, out, _ = run("check", "--issue", "14", "--list", "staging")
    assert code == 0
    assert "spam score 0.0 (SpamAssassin " in out
    assert "no rule scored" in out

    issue = project / "issues" / "14.yaml"
    gtube = "XJS\\*C4JDBQADN1.NSBN3\\*2IDNEN\\*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL\\*C.34X"
    text = issue.read_text(encoding="utf-8").replace("sections:", f"intro: {gtube}\nsections:", 1)
    issue.write_text(text, encoding="utf-8")
    code, out, _ = run("check", "--issue", "14")
    assert code == 1
    assert "error: SpamAssassin scores the sample message 1000.0, which it calls spam" in out
    assert "issue 14: 1 error(s), 2 warning(s)" in out


def test_check_without_spamassassin_says_how_to_install_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(project))  # a folder without the program
    code, out, _ = run("check", "--issue", "14")
    assert code == 0
    assert "spam score not measured: `spamassassin` is not installed" in out
    assert "`apt-get install spamassassin`" in out
    assert "issue 14: 0 error(s), 2 warning(s)" in out


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--issue", "14"],
        ["build", "--issue", "14"],
        ["build", "--site", "site"],
        ["send", "--issue", "14", "--dry-run"],
    ],
)
def test_an_impossible_date_is_an_error_at_its_line(project: Path, args: list[str]) -> None:
    # issue 13.2: `date: 2021-02-30` was a ValueError traceback in every one of these.
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    title = "title: AI系统内容推荐第14期\n"
    line = text.splitlines().index(title.strip()) + 2
    path.write_text(text.replace(title, f"{title}date: 2021-02-30\n"), encoding="utf-8")
    if "--site" in args:
        publish_all(project)  # an unsent issue is not on the site by default: nothing to build
    code, _, err = run(*args)
    assert code == 1
    assert err.startswith(
        f"error: issues/14.yaml:{line}: date: 2021-02-30 is not a real date "
        "(day is out of range for month)"
    )
    assert "Traceback" not in err


def test_check_refuses_a_link_that_would_carry_each_readers_unsubscribe_url(
    project: Path,
) -> None:
    # issue 13.4: check reported 0 errors, and every reader's link went to a third party.
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    evil = "https://evil.example/track?u=__NL_UNSUBSCRIBE_URL__&n=__NL_NAME__"
    text = text.replace('"https://github.com/microsoft/DirectML"', f'"{evil}"')
    path.write_text(text, encoding="utf-8")
    code, out, err = run("check", "--issue", "14")
    assert code == 1
    assert out == ""
    assert err.splitlines()[0] == (
        "error: issues/14.yaml:40: sections[0].items[4].links[0].url: contains "
        "__NL_UNSUBSCRIBE_URL__: words starting with __NL_ are filled in per reader (with their "
        "name or unsubscribe link); remove it"
    )


def test_build_dates_the_email_even_when_the_delivery_log_is_out_of_reach(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The date comes from the log when it can be read; a PostgreSQL log the editor's machine
    cannot reach does not stop `build` (the email is dated as if sent now)."""
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("NEWSLETTER_OUTBOX__URL", f"postgresql://editor@127.0.0.1:{port}/news")
    code, _, err = run("build", "--issue", "14")
    assert code == 0, err
    html = (project / "out" / "14" / "email.html").read_text(encoding="utf-8")
    today = dt.datetime.now(dt.UTC).date()
    assert f'<time datetime="{today.isoformat()}">' in html
