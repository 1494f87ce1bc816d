"""The HTML click report in headless Chromium: no WCAG 2.1 AA violation (axe-core) at phone and
desktop widths in the light and the dark scheme, no sideways scroll, the charts drawn in the
scheme's colours, and no script run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from newsletter.clicks.page import render_html
from newsletter.models import Issue
from support.clickreports import fixed_report
from test_accessibility_browser import WCAG_AA, violations

pytestmark = pytest.mark.browser


@pytest.fixture
def report_file(issue: Issue, tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    path.write_text(render_html(fixed_report(issue), language="zh-CN"), encoding="utf-8")
    return path


@pytest.fixture(params=[(w, s) for w in (375, 680) for s in ("light", "dark")], ids=str)
def report_page(browser: Any, report_file: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    width, scheme = request.param
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(report_file.as_uri())
    yield page
    context.close()


def test_the_report_in_each_width_and_scheme(report_page: Any) -> None:
    dark = report_page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    background = report_page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == ("rgb(13, 17, 23)" if dark else "rgb(255, 255, 255)")
    bar = report_page.evaluate(
        "getComputedStyle(document.querySelector('svg .series.serie-0 rect')).fill"
    )
    assert bar == ("rgb(68, 147, 248)" if dark else "rgb(9, 105, 218)")
    # The values are drawn past their bars, on the page: in its ink (once white on white).
    fills = report_page.evaluate(
        "[...document.querySelectorAll('svg text.value')].map(t => getComputedStyle(t).fill)"
    )
    ink = report_page.evaluate("getComputedStyle(document.documentElement).color")
    assert fills
    assert set(fills) == {ink}
    results = Axe().run(report_page, options={**WCAG_AA, "resultTypes": ["violations", "passes"]})
    assert violations(report_page) == []
    assert "color-contrast" in {rule["id"] for rule in results.response["passes"]}
    width = report_page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], "the report scrolls sideways"
    charts = report_page.evaluate(
        "[...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width)"
    )
    assert len(charts) == 2
    assert all(0 < w <= width[1] for w in charts)


def test_no_script_runs_in_the_report(browser: Any, report_file: Path) -> None:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text))
    page.goto(report_file.as_uri())
    scripts = page.evaluate("document.scripts.length")
    pygal = page.evaluate("typeof window.pygal")
    context.close()
    assert scripts == 0
    assert pygal == "undefined"
    assert errors == []
