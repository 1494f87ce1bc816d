"""The email as readers see it, checked by real engines in headless Chromium.

The sample recipient's HTML part (decoded from the message bytes `send` would deliver) of issue
14 and of the two weeklies of tests/data/weeklies at 375 px and 680 px, in the light and the dark
scheme (`prefers-color-scheme` emulated): axe-core (the
copy `axe-playwright-python` ships) finds no WCAG 2.1 AA violation, every text node has the
contrast it needs against the background it is really drawn on, every link a reader taps on a
phone is at least 44 px high, and nothing scrolls sideways. The preview's and `serve`'s pages get
the same axe run. Without Chromium the tests skip, except in CI (CI=true).
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from newsletter.config.settings import Settings
from newsletter.draft import review
from newsletter.issues import load_issue
from newsletter.mail.message import sample_message
from newsletter.mail.tracking import render_for_sending
from newsletter.models import Issue
from newsletter.rendering.render import render_issue
from support.capture import capture_server, send_test
from support.preview import running_preview
from support.project import copy_project
from support.site import one_click_url, running_service
from support.weeklies import CHINESE, ENGLISH, add_weekly, route_images, weekly_settings

pytestmark = pytest.mark.browser

CONTRAST_JS = (Path(__file__).parent / "support" / "contrast.js").read_text(encoding="utf-8")
WCAG_AA = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
    "resultTypes": ["violations"],
}
WIDTHS = (375, 680)
SCHEMES = ("light", "dark")
TAP_TARGET = 44  # px, Apple's and WCAG 2.5.5's minimum
TAP_SELECTOR = "h3, .nl-links, .nl-compact, .nl-more, .nl-viewlink, .nl-footer-text"
Sizes = dict[str, tuple[int, int]]


def email_html(settings: Settings, issue: Issue | None = None) -> str:
    """The HTML part of the sample recipient's message, as it arrives."""
    issue = issue or load_issue(settings.issues_dir, 14)
    sample, _ = sample_message(render_issue(issue, settings), settings, "main")
    parsed = email.message_from_bytes(sample.data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(("html",))
    assert part is not None
    content = part.get_content()
    assert isinstance(content, str)
    return content


def violations(page: Any) -> list[str]:
    """axe-core's WCAG 2.1 A/AA violations, one line each with the first element it names."""
    found = Axe().run(page, options=WCAG_AA).response["violations"]
    return [
        f"{v['id']} ({len(v['nodes'])}x): {v['nodes'][0]['target']} "
        f"{v['nodes'][0]['failureSummary']}"
        for v in found
    ]


def contrast_failures(page: Any) -> list[dict[str, Any]]:
    results = page.evaluate(CONTRAST_JS)
    assert len(results) >= 40, "the contrast walk found too few text nodes to be looking"
    return [r for r in results if r["ratio"] < r["needed"]]


@pytest.fixture
def email_file(settings: Settings, tmp_path: Path) -> Path:
    """Issue 14's HTML part in a file: the page each test opens."""
    path = tmp_path / "email.html"
    path.write_text(email_html(settings), encoding="utf-8")
    return path


@pytest.fixture(params=[(w, s) for w in WIDTHS for s in SCHEMES], ids=lambda p: f"{p[0]}-{p[1]}")
def email_page(browser: Any, email_file: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    width, scheme = request.param
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(email_file.as_uri())
    yield page
    context.close()


def test_the_email_in_each_width_and_scheme(email_page: Any) -> None:
    # First that the dark run really is looking at the dark rules.
    dark = email_page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    card = email_page.evaluate(
        "getComputedStyle(document.querySelector('.nl-card table')).backgroundColor"
    )
    assert card == ("rgb(22, 27, 34)" if dark else "rgb(255, 255, 255)")
    assert violations(email_page) == []
    assert contrast_failures(email_page) == []
    width = email_page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], "the email scrolls sideways"


@pytest.mark.parametrize("mode", ["aggregate", "per-reader"])
def test_a_tracked_email_and_its_canary(
    browser: Any, settings: Settings, tmp_path: Path, mode: str
) -> None:
    """The hidden canary is nothing anyone sees, taps or hears: axe finds nothing in a tracked
    email, and the canary has no box and no place in the tab order."""
    tracked = settings.model_copy(
        update={"tracking": settings.tracking.model_copy(update={"clicks": mode})}
    )
    sending = render_for_sending(load_issue(settings.issues_dir, 14), tracked, "main")
    sample, _ = sample_message(sending.rendered, tracked, "main", sending.links)
    parsed = email.message_from_bytes(sample.data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(("html",))
    assert part is not None
    path = tmp_path / "tracked.html"
    path.write_text(str(part.get_content()), encoding="utf-8")
    context = browser.new_context(viewport={"width": 375, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())
    assert violations(page) == []
    canary = page.evaluate(
        """(() => { const a = document.querySelector('a[href*="/r/"]');
             const box = a.getBoundingClientRect();
             return [a.checkVisibility(), box.width * box.height, a.tabIndex, a.textContent];
           })()"""
    )
    context.close()
    assert canary == [False, 0, -1, ""]


def test_links_are_tap_targets_on_a_phone(browser: Any, email_file: Path) -> None:
    """Every link outside running text (titles, link rows, compact lists, the notice and the
    lines around the card) is at least 44 px high at 375 px."""
    context = browser.new_context(viewport={"width": 375, "height": 900})
    page = context.new_page()
    page.goto(email_file.as_uri())
    heights = page.evaluate(
        f"const TAP_TARGETS = {TAP_SELECTOR!r};"
        """[...document.querySelectorAll('a')]
             .filter((a) => a.closest(TAP_TARGETS) && a.checkVisibility())
             .map((a) => [a.textContent.trim().slice(0, 30), a.getBoundingClientRect().height])"""
    )
    context.close()
    assert len(heights) >= 20
    assert [(text, h) for text, h in heights if h < TAP_TARGET] == []


def test_a_regressed_colour_is_caught(browser: Any, email_file: Path, tmp_path: Path) -> None:
    """The contrast walk fails the old footer colour in dark mode (3.6:1), and so does axe."""
    html = email_file.read_text(encoding="utf-8")
    broken, count = re.subn(
        r"(\.nl-meta,\.nl-date,\.nl-footer-text,[^{]*\{color:)#9da7b3", r"\g<1>#656d76", html
    )
    assert count == 1
    path = tmp_path / "broken.html"
    path.write_text(broken, encoding="utf-8")
    context = browser.new_context(viewport={"width": 375, "height": 900}, color_scheme="dark")
    page = context.new_page()
    page.goto(path.as_uri())
    failures = contrast_failures(page)
    found = violations(page)
    context.close()
    assert {f["color"] for f in failures} == {"#656d76"}
    assert min(f["ratio"] for f in failures) < 4.5
    assert any(v.startswith("color-contrast") for v in found)


@pytest.fixture(scope="module")
def weekly_files(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[int, tuple[Path, Settings, Sizes]]:
    """Each weekly's HTML part in a file, the settings whose images it links, and the size of
    each remote image it shows."""
    root = copy_project(tmp_path_factory.mktemp("weeklies") / "project")
    files = {}
    for number in (CHINESE, ENGLISH):
        path = add_weekly(root, number)
        settings = weekly_settings(root, number)
        draft = review(settings, path, "main")
        page = root / f"email-{number}.html"
        page.write_text(draft.html, encoding="utf-8")
        sizes = {
            image.src: (image.width, image.height)
            for image in draft.issue.images
            if image.width and image.height and not image.local
        }
        files[number] = (page, settings, sizes)
    return files


@pytest.mark.parametrize("number", [CHINESE, ENGLISH], ids=["chinese", "english"])
@pytest.mark.parametrize(("width", "scheme"), [(w, s) for w in WIDTHS for s in SCHEMES])
def test_the_weeklies_in_each_width_and_scheme(
    browser: Any,
    weekly_files: dict[int, tuple[Path, Settings, Sizes]],
    number: int,
    width: int,
    scheme: str,
) -> None:
    """issue 20: images with their alt text and size, paragraphs, quotes, lists and code, at
    375 and 680 px, light and dark: axe finds nothing, every text has its contrast, nothing
    scrolls sideways, every image has loaded at its own aspect, and taps are 44 px."""
    page_file, settings, sizes = weekly_files[number]
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    route_images(context, settings, sizes)
    page = context.new_page()
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    try:
        assert violations(page) == []
        assert contrast_failures(page) == []
        scroll = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert scroll[0] <= scroll[1], "the email scrolls sideways"
        images = page.evaluate(
            """[...document.querySelectorAll('img')].map((img) => [img.alt,
                 img.complete && img.naturalWidth > 0, img.getBoundingClientRect().width,
                 img.getBoundingClientRect().height, +img.getAttribute('width'),
                 +img.getAttribute('height')])"""
        )
        assert len(images) == (39 if number == CHINESE else 0)
        for alt, loaded, shown_w, shown_h, width_attr, height_attr in images:
            assert alt
            assert loaded
            assert shown_w <= width - 2 * 16
            # Shown at the aspect its width and height attributes give: nothing jumps.
            assert abs(shown_h / shown_w - height_attr / width_attr) < 0.02
        if width == 375:
            heights = page.evaluate(
                f"const TAP_TARGETS = {TAP_SELECTOR!r};"
                """[...document.querySelectorAll('a')]
                     .filter((a) => a.closest(TAP_TARGETS) && a.checkVisibility())
                     .map((a) => [a.textContent.trim().slice(0, 30),
                                  a.getBoundingClientRect().height])"""
            )
            assert [(text, h) for text, h in heights if h < TAP_TARGET] == []
    finally:
        context.close()


def axe_clean(browser: Any, url: str, scheme: str, width: int = 1200, click: str = "") -> None:
    """Open `url` (clicking `click` first, if given) and assert axe finds nothing; also that
    axe did look at text contrast, so an empty list is not an empty page."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        page.goto(url)
        if click:
            page.click(click)
        results = Axe().run(page, options={**WCAG_AA, "resultTypes": ["violations", "passes"]})
        found = violations(page)
    finally:
        context.close()
    assert found == [], url
    assert "color-contrast" in {rule["id"] for rule in results.response["passes"]}, url


@pytest.mark.parametrize("scheme", SCHEMES)
def test_preview_pages_have_no_wcag_aa_violation(browser: Any, project: Path, scheme: str) -> None:
    with running_preview(project) as preview:
        axe_clean(browser, f"{preview.url}/", scheme)
        axe_clean(browser, f"{preview.url}/issues/14", scheme)
        axe_clean(browser, f"{preview.url}/issues/14", scheme, click="[data-set='tab:checks']")
        axe_clean(browser, f"{preview.url}/issues/14", scheme, click="[data-set='tab:text']")
        axe_clean(browser, f"{preview.url}/mailbox", scheme)
        with capture_server(project) as port:
            send_test(project, port)
        key = next((project / ".newsletter" / "mailbox" / "new").iterdir()).name
        axe_clean(browser, f"{preview.url}/mailbox", scheme)
        axe_clean(browser, f"{preview.url}/mailbox/{key}", scheme)
        axe_clean(browser, f"{preview.url}/mailbox/{key}", scheme, click="[data-set='tab:headers']")


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.usefixtures("all_published")
def test_serve_pages_have_no_wcag_aa_violation(browser: Any, project: Path, scheme: str) -> None:
    with running_service(project) as service:
        axe_clean(browser, f"{service.url}/", scheme, 375)
        axe_clean(browser, f"{service.url}/issues/14", scheme, 680)
        axe_clean(browser, f"{service.url}/unsubscribe", scheme, 375)
        axe_clean(browser, one_click_url(service.settings), scheme, 375)
        axe_clean(browser, one_click_url(service.settings), scheme, 375, click="#confirm")
