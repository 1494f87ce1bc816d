"""`newsletter preview` over real HTTP on 127.0.0.1: pages, parts, errors, live events, shutdown."""

from __future__ import annotations

import email
import email.policy
import mailbox
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from newsletter import draft
from newsletter.cli.main import cli
from newsletter.config.settings import Settings, load_settings
from newsletter.database import open_database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.errors import IssueNotFoundError, NewsletterError
from newsletter.rendering.places import Place, Region
from newsletter.web.listen import bind_socket
from newsletter.web.preview import workspace as preview_module
from newsletter.web.preview.pages import email_document
from support.preview import RunningPreview, running_preview
from support.tracked import tracked_send
from support.weeklies import CHINESE, add_weekly

TITLE = "AI系统内容推荐第14期"


@pytest.fixture
def preview(project: Path) -> Iterator[RunningPreview]:
    with running_preview(project) as running:
        yield running


def get(preview: RunningPreview, path: str) -> httpx.Response:
    return httpx.get(preview.url + path, timeout=10)


def parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def test_index_lists_each_issue_with_size_and_warnings(preview: RunningPreview) -> None:
    response = get(preview, "/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    row = re.search(r"<tr class=\"\">(.*?)</tr>", response.text, re.DOTALL)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.DOTALL)
    assert cells[0] == '<a href="/issues/14">14</a>'
    assert TITLE in cells[1]
    assert cells[2] == "—"  # issue 14 has no date
    assert re.fullmatch(r"\d+\.\d KB", cells[3])
    assert cells[4:] == ["1", "0"]  # the duplicate-link warning, no errors


def test_issue_page_shows_title_size_checks_and_frame(preview: RunningPreview) -> None:
    response = get(preview, "/issues/14")
    assert response.status_code == 200
    page = response.text
    assert TITLE in page
    assert 'data-state="ok"' in page
    assert 'data-email-src="/issues/14/email.html"' in page
    assert re.search(r"HTML \d+\.\d KB of ~102 KB", page)
    assert "is linked under 2 items" in page  # the check result, in view
    inbox = re.search(r'<div id="inbox-line".*?</div>', page, re.DOTALL)
    assert inbox is not None
    assert "AI系统内容推荐 &lt;digest@news.example.org&gt;" in inbox.group(0)  # From, escaped
    assert f"<b>{TITLE}</b>" in inbox.group(0)  # the Subject header
    assert "— OneFlow：从零重新设计分布式深度学习框架" in inbox.group(0)  # the preheader
    assert "script-src" not in response.headers["content-security-policy"]
    assert "default-src 'self'" in response.headers["content-security-policy"]


def test_parts_are_the_ones_build_writes(preview: RunningPreview, project: Path) -> None:
    result = CliRunner().invoke(cli, ["build", "--issue", "14", "--out", "built"])
    assert result.exit_code == 0, result.output
    built = project / "built"
    text = get(preview, "/issues/14/text.txt")
    assert text.status_code == 200
    assert text.text.replace("\r\n", "\n") == (built / "email.txt").read_text(encoding="utf-8")
    source = get(preview, "/issues/14/source.html")
    assert source.headers["content-type"].startswith("text/plain")
    assert source.text.replace("\r\n", "\n") == (built / "email.html").read_text(encoding="utf-8")
    eml = get(preview, "/issues/14/message.eml")
    ours, theirs = parse(eml.content), parse((built / "email.eml").read_bytes())
    assert ours["To"] == theirs["To"] == "示例读者 <reader@example.org>"
    assert ours["List-Unsubscribe"] == theirs["List-Unsubscribe"]
    download = get(preview, "/issues/14/message.eml?download=1")
    assert download.headers["content-type"] == "message/rfc822"
    assert "issue-14-sample.eml" in download.headers["content-disposition"]


def test_email_is_personalised_and_cannot_run_scripts(preview: RunningPreview) -> None:
    response = get(preview, "/issues/14/email.html")
    assert response.status_code == 200
    html = response.text
    assert "示例读者，你好！" in html
    assert "__NL_" not in html
    assert '<base target="_blank">' in html
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script" not in policy


def test_dark_toggle_forces_the_emails_own_dark_rules(preview: RunningPreview) -> None:
    light = get(preview, "/issues/14/email.html?scheme=light").text
    dark = get(preview, "/issues/14/email.html?scheme=dark").text
    assert "prefers-color-scheme" not in light + dark
    # The dark block's first rule, switched on in dark and off in light.
    rule = ".nl-page,.nl-page>table"
    assert re.search(r"@media \(min-width: 0px\)\s*\{\s*" + re.escape(rule), dark)
    assert re.search(r"@media \(max-width: -1px\)\s*\{\s*" + re.escape(rule), light)


def test_email_document_decides_every_scheme_query() -> None:
    html = (
        "<html><head><style>@media screen and (prefers-color-scheme: DARK) {a{}}"
        "@media (prefers-color-scheme:light) {b{}}</style></head><body></body></html>"
    )
    dark = email_document(html, "dark")
    assert "screen and (min-width: 0px) {a{}}" in dark
    assert "@media (max-width: -1px) {b{}}" in dark
    light = email_document(html, "light")
    assert "screen and (max-width: -1px) {a{}}" in light
    assert "@media (min-width: 0px) {b{}}" in light
    assert light.count("<base") == 1
    prose = "<p>(prefers-color-scheme: dark) is a media feature</p>"
    assert prose in email_document(html.replace("<body>", f"<body>{prose}"), "dark")


def test_missing_issue_is_404_naming_the_issues_there_are(preview: RunningPreview) -> None:
    for path in ("/issues/99", "/issues/99/email.html", "/issues/99/text.txt"):
        response = get(preview, path)
        assert response.status_code == 404, path
    page = get(preview, "/issues/99").text
    assert "No issue 99" in page
    assert "issues: 14" in page


def test_broken_issue_shows_the_error_and_recovers(preview: RunningPreview) -> None:
    original = preview.issue_file.read_text(encoding="utf-8")
    preview.rewrite("title: AI系统内容推荐第14期", "titel: AI系统内容推荐第14期")
    page = wait_for(preview, "/issues/14", 'data-state="error"')
    assert re.search(r"14\.yaml:\d+: titel: is not a known field", page)
    assert re.search(r"14\.yaml:\d*: ?title: is required|14\.yaml: title: is required", page)
    assert "newsletter check" in page  # the hint, too
    assert 'data-email-src=""' in page
    assert get(preview, "/issues/14/email.html").status_code == 422
    index = get(preview, "/").text
    assert "cannot render" in index
    preview.issue_file.write_text(original, encoding="utf-8")
    page = wait_for(preview, "/issues/14", 'data-state="ok"')
    assert TITLE in page


def test_the_checks_tab_shows_what_the_issue_file_silenced(preview: RunningPreview) -> None:
    # issue 24.6: a silenced warning leaves the list and the counts, and is named as silenced.
    preview.rewrite("sections:\n", "silence: [duplicate-url]\nsections:\n")
    page = wait_for(preview, "/issues/14", "Silenced by the issue file")
    checks = page[page.index('<div id="checks"') :]
    assert "<summary>Silenced by the issue file: duplicate-url (1)</summary>" in checks
    shown = checks[: checks.index('<details id="silenced"')]
    assert "is linked under 2 items" not in shown
    assert "is linked under 2 items" in checks  # in the silenced list, folded
    row = re.search(r"<tr class=\"\">(.*?)</tr>", get(preview, "/").text, re.DOTALL)
    assert row is not None
    assert re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.DOTALL)[4:] == ["0", "0"]


def test_broken_yaml_names_the_line(preview: RunningPreview) -> None:
    preview.rewrite("sections:\n", "sections: [\n")
    page = wait_for(preview, "/issues/14", 'data-state="error"')
    assert re.search(r"14\.yaml:\d+: is not valid YAML", page)


def test_an_impossible_date_is_the_editors_error_not_a_bug(preview: RunningPreview) -> None:
    # issue 13.2: the preview called `date: 2021-02-30` "a bug in newsletter".
    preview.rewrite(
        "title: AI系统内容推荐第14期\n", "title: AI系统内容推荐第14期\ndate: 2021-02-30\n"
    )
    page = wait_for(preview, "/issues/14", 'data-state="error"')
    assert re.search(r"14\.yaml:\d+: date: 2021-02-30 is not a real date", page)
    assert "a bug in newsletter" not in page


def test_broken_template_shows_the_template_error(preview: RunningPreview) -> None:
    template = preview.project / "templates" / "email" / "issue.mjml"
    template.write_text(
        template.read_text(encoding="utf-8").replace(
            "{{ issue.title }}</h1>", "{{ issue.title </h1>"
        ),
        encoding="utf-8",
    )
    page = wait_for(preview, "/issues/14", 'data-state="error"')
    assert re.search(r"issue\.mjml:\d+", page)


def test_broken_config_shows_the_config_error(preview: RunningPreview) -> None:
    config = preview.project / "newsletter.toml"
    config.write_text(config.read_text(encoding="utf-8").replace("[render]", "[render"))
    page = wait_for(preview, "/", "Cannot read the config", status=500)
    assert "newsletter.toml" in page


def test_ui_escapes_what_the_issue_says(preview: RunningPreview) -> None:
    preview.rewrite("title: AI系统内容推荐第14期", 'title: "<script>alert(1)</script> & co"')
    page = wait_for(preview, "/issues/14", "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co")
    assert "<script>alert" not in page
    assert "<script>alert" not in get(preview, "/").text


def test_unknown_host_header_is_refused(preview: RunningPreview) -> None:
    response = httpx.get(preview.url + "/", headers={"Host": "attacker.example"}, timeout=10)
    assert response.status_code == 400


def test_events_announce_each_save(preview: RunningPreview) -> None:
    with httpx.stream("GET", preview.url + "/events", timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        first = next_event(lines)
        assert next_event(lines, "mail") == "0"
        preview.rewrite("title: AI系统内容推荐第14期", "title: 第十四期")
        second = next_event(lines)
    assert first != second
    assert "第十四期" in get(preview, "/issues/14").text
    assert f'data-version="{second}"' in get(preview, "/issues/14").text


def test_mailbox_lists_captured_messages(preview: RunningPreview) -> None:
    assert "Nothing captured yet" in get(preview, "/mailbox").text
    (preview.project / ".newsletter").mkdir()
    box = mailbox.Maildir(preview.project / ".newsletter" / "mailbox", create=True)
    message = EmailMessage()
    message["Subject"] = "[TEST] <b>第14期</b>"
    message["From"] = "digest@news.example.org"
    message["To"] = "reader@example.org"
    message["Date"] = "Mon, 30 Nov 2026 08:00:00 +0000"
    message.set_content("hello")
    key = box.add(message)
    page = get(preview, "/mailbox").text
    assert "[TEST] &lt;b&gt;第14期&lt;/b&gt;" in page
    assert f'href="/mailbox/{key}"' in page
    assert f'href="/mailbox/{key}/message.eml?download=1"' in page
    raw = get(preview, f"/mailbox/{key}/message.eml")
    assert raw.status_code == 200
    assert b"Subject:" in raw.content
    assert get(preview, "/mailbox/nope").status_code == 404
    assert get(preview, "/mailbox/nope/message.eml").status_code == 404


def test_mailbox_changes_are_their_own_event(project: Path) -> None:
    (project / ".newsletter").mkdir()
    box = mailbox.Maildir(project / ".newsletter" / "mailbox", create=True)
    message = EmailMessage()
    message["Subject"] = "[TEST] 第14期"
    message.set_content("hello")
    with running_preview(project) as preview:
        with httpx.stream("GET", preview.url + "/events", timeout=10) as stream:
            lines = stream.iter_lines()
            version = next_event(lines)
            assert next_event(lines, "mail") == "0"
            box.add(message)
            assert next_event(lines, "mail") == "1"  # not a "version": issue pages stay put
        assert "[TEST] 第14期" in get(preview, "/mailbox").text
        assert f'data-version="{version}"' in get(preview, "/issues/14").text


def test_a_bug_in_the_pipeline_is_shown_not_fatal(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(draft, "render_for_sending", broken)
    view = preview_module.build_view(settings, 14)
    assert view.error is not None
    assert view.error.message == "unexpected RuntimeError while rendering: boom"
    assert "bug in newsletter" in view.error.hint
    with pytest.raises(IssueNotFoundError):
        preview_module.build_view(settings, 99)


def test_saving_one_issue_keeps_the_others_rendered(project: Path) -> None:
    shutil.copy(project / "issues" / "14.yaml", project / "issues" / "15.yaml")
    fifteen = project / "issues" / "15.yaml"
    fifteen.write_text(fifteen.read_text(encoding="utf-8").replace("number: 14", "number: 15"))
    workspace = preview_module.Workspace(project / "newsletter.toml")
    first = {n: workspace.view(n) for n in (14, 15)}
    workspace.invalidate({project / "issues" / "14.yaml"})
    assert workspace.view(15) is first[15]
    assert workspace.view(14) is not first[14]
    workspace.invalidate({project / "templates" / "email" / "issue.mjml"})
    assert workspace.view(15) is not first[15]


@pytest.mark.slow
def test_an_issues_folder_created_after_start_is_followed(project: Path) -> None:
    saved = (project / "issues" / "14.yaml").read_text(encoding="utf-8")
    shutil.rmtree(project / "issues")
    with running_preview(project) as preview:
        assert "No issues yet" in get(preview, "/").text
        (project / "issues").mkdir()
        (project / "issues" / "14.yaml").write_text(saved, encoding="utf-8")
        wait_for(preview, "/", TITLE)
        # Followed from then on, like any other save.
        preview.rewrite(f"title: {TITLE}", "title: 新项目的第一期")
        wait_for(preview, "/", "新项目的第一期")


def test_busy_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NewsletterError) as caught:
            bind_socket("127.0.0.1", port)
        assert f"port {port} on 127.0.0.1 is already in use" in caught.value.message
        assert "--port" in caught.value.hint


@pytest.mark.slow
def test_cli_busy_port_exits_1_without_traceback(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = subprocess.run(
            [sys.executable, "-m", "newsletter", "preview", "--port", port, "--no-open"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert "already in use" in result.stderr
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_unknown_issue_exits_1(project: Path) -> None:
    result = CliRunner().invoke(cli, ["preview", "--issue", "99", "--port", "0", "--no-open"])
    assert result.exit_code == 1
    assert "no such issue (issues: 14)" in result.stderr


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_with_a_page_open(project: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "newsletter",
            "preview",
            "--issue",
            "14",
            "--port",
            "0",
            "--no-open",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.match(r"Previewing at (http://127\.0\.0\.1:\d+)/issues/14 ", first)
        assert match, first
        base = match.group(1)
        assert httpx.get(base + "/issues/14", timeout=10).status_code == 200
        # An open event stream, as a browser tab keeps, must not hold the shutdown up.
        with httpx.stream("GET", base + "/events", timeout=60) as stream:
            next_event(stream.iter_lines())
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    # Without ending the stream, uvicorn would wait out its 3 s graceful-shutdown timeout and
    # then cancel the stream's task, which it says (at the "warning" level the preview logs).
    assert "graceful shutdown exceeded" not in err
    assert "Preview stopped." in out
    assert "Traceback" not in err


def next_event(lines: Iterator[str], name: str = "version") -> str:
    """The data of the next event called `name` on an SSE stream; any other event fails, but
    "checks" events (background checks finishing, at their own pace) are passed over."""
    event = ""
    for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            if event == "checks" and name != "checks":
                continue
            assert event == name, f"expected a {name!r} event, got {event!r}"
            return line.removeprefix("data: ")
    raise AssertionError("the event stream ended")


def quiet(preview: RunningPreview, seconds: float = 1.0) -> None:
    """Return once no file change has been published for `seconds`."""
    deadline = time.monotonic() + 10
    count, since = preview.server.hub.count, time.monotonic()
    while time.monotonic() - since < seconds:
        assert time.monotonic() < deadline, "the watcher never went quiet"
        time.sleep(0.05)
        if preview.server.hub.count != count:
            count, since = preview.server.hub.count, time.monotonic()


def wait_for(preview: RunningPreview, path: str, needle: str, status: int | None = None) -> str:
    """The page once it shows `needle`: the watcher notices a save within milliseconds."""
    deadline = time.monotonic() + 5
    while True:
        response = get(preview, path)
        if needle in response.text:
            if status is not None:
                assert response.status_code == status
            return response.text
        assert time.monotonic() < deadline, f"{path} never showed {needle!r}"
        time.sleep(0.05)


def test_an_editors_atomic_save_is_seen(preview: RunningPreview) -> None:
    """Editors such as vim write a temporary file and rename it over the issue."""
    text = preview.issue_file.read_text(encoding="utf-8")
    temporary = preview.issue_file.with_name(".14.yaml.swp-new")
    temporary.write_text(text.replace(f"title: {TITLE}", "title: 原子保存"), encoding="utf-8")
    os.replace(temporary, preview.issue_file)
    assert "原子保存" in wait_for(preview, "/issues/14", "原子保存")


@pytest.mark.slow
def test_checks_show_the_spam_score_when_spamassassin_answers(preview: RunningPreview) -> None:
    """SpamAssassin runs in the background: the page says so, then a "checks" event (not a new
    version: the email frame stays) announces the score, which the Checks tab then shows."""
    if shutil.which("spamassassin") is None and os.environ.get("CI") != "true":
        pytest.skip("spamassassin is not installed (apt-get install spamassassin)")
    gtube = "XJS\\*C4JDBQADN1.NSBN3\\*2IDNEN\\*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL\\*C.34X"
    preview.rewrite("sections:", f"intro: {gtube}\nsections:")
    wait_for(preview, "/issues/14/text.txt", "GTUBE")
    # A save in place can reach the watcher as two changes (the truncation, then the text),
    # the second after the page already shows it: wait until the files are quiet, so a version
    # event on the stream below could only come from the score.
    quiet(preview)
    with httpx.stream("GET", preview.url + "/events", timeout=30) as stream:
        lines = stream.iter_lines()
        version = next_event(lines)
        assert next_event(lines, "mail") == "0"
        assert next_event(lines, "checks") == "0"
        page = get(preview, "/issues/14").text
        assert "SpamAssassin is scoring the sample message…" in page
        assert next_event(lines, "checks") == "1"
    page = get(preview, "/issues/14").text
    assert f'data-version="{version}"' in page
    assert "spam score 1000.0 (SpamAssassin " in page
    assert "which it calls spam: +1000.0 GTUBE" in page
    assert '<span id="check-count" data-live class="bad">2</span>' in page


def test_the_email_frame_shows_the_images_under_issues_from_the_folder(project: Path) -> None:
    # issue 20: the email links them where `serve` publishes them, which the preview is not.
    add_weekly(project, CHINESE)
    with running_preview(project) as preview:
        frame = get(preview, "/issues/21/email.html").text
        assert 'src="/files/images/cover.png"' in frame
        assert "news.example.org/issues/images/" not in frame
        image = get(preview, "/files/images/cover.png")
        assert image.status_code == 200
        assert image.headers["content-type"] == "image/png"
        for path in ("/files/21.md", "/files/%2e%2e/newsletter.toml", "/files/images/none.png"):
            assert get(preview, path).status_code == 404, path
        # What a reader gets is unchanged: the sample message links base_url.
        source = get(preview, "/issues/21/source.html").text
        assert 'src="https://news.example.org/issues/images/cover.png"' in source


@pytest.mark.slow
def test_the_report_tab_is_newsletter_report(project: Path) -> None:
    config = project / "newsletter.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + '\n[tracking]\nclicks = "per-reader"\n',
        encoding="utf-8",
    )
    with running_preview(project) as preview:
        page = get(preview, "/issues/14")
        assert 'data-set="tab:report"' in page.text
        assert 'src="/issues/14/report.html"' in page.text
        before = get(preview, "/issues/14/report.html")
        assert before.status_code == 200
        assert "not measured" in before.text
        assert not (project / ".newsletter" / "outbox.sqlite3").exists()  # nothing created
        environ = {"NEWSLETTER_SECRET": "preview-tests-secret-0123456789abcdef"}
        settings = load_settings(config, environ=environ)
        readers = [f"reader{n}@example.com" for n in range(7)]
        sent = tracked_send(settings, readers)
        first_item = Place(Region.TITLE, 0, 0)
        with open_database(settings.database_target) as database:
            database.clicks.add(
                [
                    StoredClick(
                        14,
                        "main",
                        ClickRecord(
                            time.time(),
                            first_item,
                            "GET",
                            False,
                            "browser:firefox",
                            "",
                            3600.0,
                            s.row,
                        ),
                    )
                    for s in sent
                ]
            )
        after = get(preview, "/issues/14/report.html")
    assert after.status_code == 200
    assert "script-src" not in after.headers["content-security-policy"]
    assert after.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<script" not in after.text
    assert "per reader" in after.text
    # Seven readers of 1.1, no machine: the line of the report.
    assert re.search(
        r'<td class="place">1\.1</td><th[^>]*>[^<]*</th><td class="n">7</td>', after.text
    )


@pytest.mark.slow
def test_a_half_sent_request_head_is_cut_off_at_serves_deadline(project: Path) -> None:
    # It was kept open for ever: the preview had none of serve's deadlines.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NEWSLETTER_SERVE__TIMEOUT": "1"}
    command = [sys.executable, "-m", "newsletter", "preview", "--port", "0", "--no-open"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.match(r"Previewing at http://(127\.0\.0\.1):(\d+)/", first)
        assert match, first
        host, port = match.group(1), int(match.group(2))
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: x")
            answer = b""
            while chunk := sock.recv(65536):  # a hang shows as the socket's TimeoutError
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert httpx.get(f"http://{host}:{port}/", timeout=10).status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=10)
        finally:
            process.kill()
