"""The preview in real headless Chromium: no console errors, both widths, live reload, errors.

One browser for the session (conftest.py: Playwright driving the system's Chromium); a fresh
server and project copy per test. Screenshots land in tests/artifacts/ (git-ignored). Without
Chromium the tests skip, except in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import mailbox
import os
import shutil
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from support.capture import beacon, capture_server, deliver, send_test
from support.preview import RunningPreview, running_preview

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
TITLE = "AI系统内容推荐第14期"
FRAME_READY = "() => document.body.dataset.frameVersion === document.body.dataset.version"
FRAME_DOC = "document.getElementById('email-frame').contentDocument"


@pytest.fixture
def preview(project: Path) -> Iterator[RunningPreview]:
    with running_preview(project) as running:
        yield running


class Tab:
    """One page of the preview, recording every console error and uncaught exception."""

    def __init__(self, browser: Any, url: str, *, framed: bool = True) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        if framed:
            self.page.wait_for_function(FRAME_READY)

    def frame_eval(self, expression: str) -> Any:
        return self.page.evaluate(f"(() => {{ const doc = {FRAME_DOC}; return {expression}; }})()")

    def wait_frame(self, condition: str, timeout: float = 2000) -> None:
        """Wait until `condition` (JS over `doc`, the frame's document) holds; a frame in the
        middle of loading its new version counts as not yet."""
        self.page.wait_for_function(
            f"() => {{ try {{ const doc = {FRAME_DOC}; return !!({condition}); }}"
            " catch (_) { return false; } }",
            timeout=timeout,
        )

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / name))


@pytest.fixture
def tab(browser: Any, preview: RunningPreview) -> Iterator[Tab]:
    opened = Tab(browser, f"{preview.url}/issues/14")
    yield opened
    opened.context.close()


def test_both_widths_without_console_errors_or_horizontal_scroll(tab: Tab) -> None:
    assert TITLE in tab.frame_eval("doc.querySelector('h1').textContent")
    assert tab.frame_eval("doc.defaultView.innerWidth") == 680
    tab.screenshot("preview-desktop.png")

    tab.page.click("[data-set='width:mobile']")
    tab.wait_frame("doc.defaultView.innerWidth === 375")
    scroll = tab.frame_eval("[doc.documentElement.scrollWidth, doc.documentElement.clientWidth]")
    assert scroll[0] <= scroll[1], f"the email scrolls sideways at 375 px: {scroll}"
    # MJML's desktop rules are off at this width: the card fills the frame.
    assert tab.frame_eval("doc.querySelector('.nl-card').getBoundingClientRect().right") <= 375
    tab.screenshot("preview-mobile.png")
    assert tab.errors == []


def test_saving_a_new_title_updates_the_open_page(tab: Tab, preview: RunningPreview) -> None:
    tab.page.evaluate("window.notReloaded = true")
    preview.rewrite(f"title: {TITLE}", "title: 第十四期：新标题")
    tab.wait_frame("doc.querySelector('h1').textContent.includes('第十四期：新标题')")
    assert tab.page.evaluate("window.notReloaded") is True  # swapped in place, not reloaded
    assert "第十四期：新标题" in tab.page.inner_text("#issue-heading")
    assert tab.errors == []


def test_frame_keeps_its_scroll_position_across_a_reload(tab: Tab, preview: RunningPreview) -> None:
    tab.frame_eval("doc.defaultView.scrollTo(0, 900)")
    before = tab.page.evaluate("document.body.dataset.frameVersion")
    preview.rewrite("title: 项目", "title: 项目（更新）")
    tab.page.wait_for_function(
        f"() => document.body.dataset.frameVersion !== '{before}'", timeout=2000
    )
    assert "项目（更新）" in tab.frame_eval("doc.body.textContent")
    assert abs(tab.frame_eval("doc.defaultView.scrollY") - 900) < 5


def test_broken_file_shows_the_error_overlay_then_recovers(
    tab: Tab, preview: RunningPreview
) -> None:
    preview.rewrite(f"title: {TITLE}", f"titel: {TITLE}")
    overlay = tab.page.locator("#error-overlay")
    overlay.wait_for(state="visible", timeout=2000)
    text = overlay.inner_text()
    assert "Cannot render issue 14" in text
    assert "issues/14.yaml:5: titel: is not a known field" in text
    frame_style = "getComputedStyle(document.getElementById('email-frame')).visibility"
    assert tab.page.evaluate(frame_style) == "hidden"  # in place of the email, not beside it
    tab.screenshot("preview-error.png")

    preview.rewrite(f"titel: {TITLE}", "title: 修好了")
    overlay.wait_for(state="hidden", timeout=2000)
    tab.wait_frame("doc.querySelector('h1').textContent.includes('修好了')")
    assert tab.errors == []


def test_dark_toggle_applies_the_emails_dark_rules(tab: Tab) -> None:
    card = "getComputedStyle(doc.querySelector('.nl-card table')).backgroundColor"
    assert tab.frame_eval(card) == "rgb(255, 255, 255)"
    tab.page.click("[data-set='scheme:dark']")
    tab.wait_frame(f"{card} === 'rgb(22, 27, 34)'")
    tab.screenshot("preview-dark.png")
    tab.page.click("[data-set='scheme:light']")
    tab.wait_frame(f"{card} === 'rgb(255, 255, 255)'")
    assert tab.errors == []


def test_tabs_show_text_source_and_checks(tab: Tab) -> None:
    tab.page.click("[data-set='tab:text']")
    assert "示例读者" in tab.page.inner_text("#text-part")
    tab.page.click("[data-set='tab:eml']")
    assert "Content-Type: multipart/alternative" in tab.page.inner_text("#eml-part")
    tab.page.click("[data-set='tab:checks']")
    assert "is linked under 2 items" in tab.page.inner_text("#checks")
    assert tab.page.is_hidden("#email-frame")
    assert tab.errors == []


def test_deleting_and_restoring_the_issue_follows_along(tab: Tab, preview: RunningPreview) -> None:
    text = preview.issue_file.read_text(encoding="utf-8")
    preview.issue_file.unlink()
    tab.page.wait_for_selector("text=No issue 14", timeout=2000)
    preview.issue_file.write_text(text, encoding="utf-8")
    tab.page.wait_for_function(FRAME_READY, timeout=2000)
    tab.wait_frame(f"doc.querySelector('h1').textContent.includes('{TITLE}')")
    # The page of a missing issue is a real 404, which Chromium logs; nothing else may appear.
    assert [e for e in tab.errors if "404 (Not Found)" not in e] == []


def test_mailbox_page_shows_a_captured_message_as_it_arrives(browser: Any, project: Path) -> None:
    (project / ".newsletter").mkdir()
    box = mailbox.Maildir(project / ".newsletter" / "mailbox", create=True)
    message = EmailMessage()
    message["Subject"] = "[TEST] 第14期 <已捕获>"
    message["To"] = "reader@example.org"
    message.set_content("hello")
    with running_preview(project) as preview:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{preview.url}/mailbox")
        page.wait_for_selector("#live-status.on")
        assert "Nothing captured yet" in page.inner_text("#mailbox")
        box.add(message)
        page.wait_for_selector("text=[TEST] 第14期 <已捕获>", timeout=2000)
        context.close()


def test_checks_tab_shows_the_spam_score_without_reloading_the_email(tab: Tab) -> None:
    if shutil.which("spamassassin") is None and os.environ.get("CI") != "true":
        pytest.skip("spamassassin is not installed (apt-get install spamassassin)")
    frame_version = tab.page.evaluate("document.body.dataset.frameVersion")
    tab.page.click("[data-set='tab:checks']")
    tab.page.wait_for_selector("#spam-score:not([data-pending])", timeout=30000)
    assert "spam score 0.0 (SpamAssassin " in tab.page.inner_text("#spam-score")
    assert "is linked under 2 items" in tab.page.inner_text("#checks")
    assert tab.page.evaluate("document.body.dataset.frameVersion") == frame_version
    assert tab.errors == []


def email_frame(tab: Tab) -> Any:
    """The email frame as Playwright reaches it: a captured message's frame has an origin of its
    own (no allow-same-origin), so the page's script cannot read it, but Playwright can."""
    return tab.page.locator("#email-frame").element_handle().content_frame()


def test_a_test_send_is_read_in_the_mailbox_tab(browser: Any, project: Path) -> None:
    with capture_server(project) as port, running_preview(project) as preview:
        tab = Tab(browser, f"{preview.url}/mailbox", framed=False)
        tab.page.wait_for_selector("#live-status.on")
        send_test(project, port)
        # Both staging recipients arrive while the page is open; the newest is listed first.
        tab.page.wait_for_function(
            "() => document.querySelectorAll('#mailbox tbody tr').length === 2"
        )
        tab.page.click("#mailbox tbody tr:first-child td:nth-child(4) a")
        tab.page.wait_for_function(FRAME_READY)
        frame = email_frame(tab)
        assert "你好！" in frame.evaluate("document.body.textContent")
        assert frame.evaluate("innerWidth") == 680
        tab.screenshot("mailbox-desktop.png")

        tab.page.click("[data-set='width:mobile']")
        frame.wait_for_function("() => innerWidth === 375")
        scroll = frame.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert scroll[0] <= scroll[1], f"the message scrolls sideways at 375 px: {scroll}"
        card = "getComputedStyle(document.querySelector('.nl-card table')).backgroundColor"
        assert frame.evaluate(card) == "rgb(255, 255, 255)"
        tab.page.click("[data-set='scheme:dark']")
        frame.wait_for_function(f"() => {card} === 'rgb(22, 27, 34)'")
        tab.screenshot("mailbox-mobile-dark.png")

        tab.page.click("[data-set='tab:text']")
        assert "你好！" in tab.page.inner_text("#text-part")
        tab.page.click("[data-set='tab:headers']")
        assert "List-Unsubscribe-Post" in tab.page.inner_text("#headers")
        tab.page.click("[data-set='tab:eml']")
        with tab.page.expect_download() as download:
            tab.page.click("text=download .eml")
        recipient = tab.page.inner_text("#headers").split("Delivered-To")[1].split()[0]
        [stored] = [
            path
            for path in (project / ".newsletter" / "mailbox" / "new").iterdir()
            if f"Delivered-To: {recipient}".encode() in path.read_bytes()
        ]
        assert Path(download.value.path()).read_bytes() == stored.read_bytes()

        # Headers is not a tab of the issue view: it shows the email there, and the choice
        # stays for the next message.
        tab.page.click("[data-set='tab:headers']")
        tab.page.goto(f"{preview.url}/issues/14")
        tab.page.wait_for_function(FRAME_READY)
        assert tab.page.evaluate("document.body.dataset.tab") == "email"
        assert tab.errors == []
        tab.context.close()


def hostile_html(remote: str) -> str:
    """Every way an HTML message can load something or run a script, all aimed at `remote`."""
    mark = "document.title='ran'"
    return f"""<html><head>
<meta http-equiv="refresh" content="0;url={remote}/refresh">
<link rel="stylesheet" href="{remote}/style.css">
<link rel="preconnect" href="{remote}">
<link rel="prefetch" href="{remote}/prefetch">
<link rel="preload" as="image" href="{remote}/preload.png">
<link rel="icon" href="{remote}/favicon.ico">
<style>@import url({remote}/import.css);
@font-face {{ font-family: far; src: url({remote}/font.woff) }}
body {{ background: url({remote}/background.png); font-family: far }}</style>
<script>{mark}</script>
<script src="{remote}/script.js"></script>
</head><body onload="{mark}">
<p id="hostile">hostile</p>
<img src="{remote}/pixel.gif" onerror="{mark}" width="1" height="1">
<img srcset="{remote}/srcset.png 2x">
<picture><source srcset="{remote}/source.png"><img alt=""></picture>
<video poster="{remote}/poster.png" src="{remote}/video.mp4"></video>
<audio src="{remote}/audio.mp3" autoplay></audio>
<iframe src="{remote}/frame.html"></iframe>
<IFRAME SRCDOC="&lt;img src={remote}/srcdoc.png&gt;"></IFRAME>
<svg><foreignObject><iframe src="{remote}/foreign.html"></iframe></foreignObject></svg>
<object data="{remote}/object"></object>
<embed src="{remote}/embed">
<svg><image href="{remote}/svg.png" width="1" height="1"/></svg>
<svg onload="{mark}"></svg>
<form action="{remote}/form"><input autofocus onfocus="{mark}"></form>
<div style="background-image: url('{remote}/inline.png')">x</div>
<table background="{remote}/table.png"><tr><td>t</td></tr></table>
<a id="script-link" href="javascript:{mark}">a javascript: link</a>
</body></html>"""


def test_a_hostile_message_runs_nothing_and_loads_nothing(browser: Any, project: Path) -> None:
    with beacon() as remote, capture_server(project) as port, running_preview(project) as preview:
        html = hostile_html(remote.url)
        message = (
            (
                "From: stranger@example.net\r\nSubject: =?UTF-8?Q?hostile=0D=0AX-Injected:_1?=\r\n"
                "MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" + html
            )
            .replace("\n", "\r\n")
            .replace("\r\r\n", "\r\n")
        )
        deliver(port, message.encode())
        [captured] = (project / ".newsletter" / "mailbox" / "new").iterdir()
        tab = Tab(browser, f"{preview.url}/mailbox/{captured.name}")
        tab.page.wait_for_load_state("networkidle")
        frame = email_frame(tab)
        assert frame.evaluate("document.getElementById('hostile').textContent") == "hostile"
        tab.page.click("[data-set='scheme:dark']")  # a reload of the frame: the same again
        tab.page.wait_for_function(FRAME_READY)
        tab.page.wait_for_load_state("networkidle")
        frame.locator("#script-link").click()
        tab.page.wait_for_load_state("networkidle")
        assert frame.evaluate("document.title") != "ran"
        assert frame.url.startswith(f"{preview.url}/mailbox/")  # the refresh went nowhere
        assert tab.page.inner_text("#message-heading").endswith("hostile␍␊X-Injected: 1")
        assert remote.connections == 0, remote.requests
        # What Chromium said it refused: the policy and the sandbox at work, nothing else.
        assert tab.errors, "Chromium reported no refusal: was the hostile markup served?"
        for error in tab.errors:
            assert "Content Security Policy" in error or "sandbox" in error, error
        tab.screenshot("mailbox-hostile.png")
        tab.context.close()
