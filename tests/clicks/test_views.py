"""The report's three views (terminal text, CSV, one HTML file) show what the value holds:
hidden figures as "< 5" everywhere, nothing that runs, nothing to fetch."""

from __future__ import annotations

import csv
import io
import re

from newsletter.clicks.charts import clicks_chart, delivery_chart
from newsletter.clicks.page import render_html
from newsletter.clicks.report import Below, ClickReport, SendSummary, build_report
from newsletter.clicks.tables import CSV_COLUMNS, fit, render_text, write_report_csv
from newsletter.models import Issue
from newsletter.rendering.places import outline
from support.clickreports import fixed_counts, fixed_report, hostile


def test_text_shows_the_lines_and_hides_small_figures(issue: Issue) -> None:
    report = fixed_report(issue)
    text = render_text(report)
    assert text.startswith(f"Issue 14 · {issue.title} · list main\n")
    assert "counted per reader" in text
    row = next(line for line in text.splitlines() if line.startswith("1.2 "))
    # 1.2's three readers, and its 90 machine requests hidden with them: section 1's machine
    # total less 1.1's would otherwise tell that every other item had none.
    assert row.split()[-3:] == ["<", "5", "hidden"]
    assert '"hidden": a figure of 5 or more' in text
    assert "complaints < 5 (< 0.13 %)" in text
    assert "Sent: 4,000 messages, 09:00 to 09:04 UTC (busiest 3,000 a minute)" in text
    assert "burst 42" in text


def test_text_fits_its_width_with_wide_characters(issue: Issue) -> None:
    from rich.cells import cell_len

    for line in render_text(fixed_report(issue), width=60).splitlines():
        if line.startswith(("1.", "2.")):
            assert cell_len(line) <= 60, line
    assert fit("腾讯发布超大预训练系统", 9) == "腾讯发布…"


def test_tracking_off_shows_the_delivery_only(issue: Issue) -> None:
    text = render_text(fixed_report(issue, mode="off"))
    assert "not measured" in text
    assert "Machine requests" not in text
    assert "Sent: 4,000" in text


def csv_rows(report: ClickReport) -> list[dict[str, str]]:
    handle = io.StringIO()
    written = write_report_csv(report, handle)
    rows = list(csv.DictReader(io.StringIO(handle.getvalue())))
    assert len(rows) == written
    return rows


def test_csv_rows_say_what_they_are(issue: Issue) -> None:
    rows = csv_rows(fixed_report(issue))
    assert list(rows[0]) == list(CSV_COLUMNS)
    items = [row for row in rows if row["kind"] == "item"]
    # Every item with a link (an item without one has nothing to click).
    linked = [item for section in issue.sections for item in section.items if item.links]
    assert len(items) == len(linked) < sum(len(s.items) for s in issue.sections)
    assert items[0] == {
        **items[0],
        "section": "1",
        "item": "1",
        "people": "40",
        "machines": "100",
    }
    assert items[1]["people"] == "< 5"
    kinds = {row["kind"]: row for row in rows}
    assert kinds["complaints"]["messages"] == "< 5"
    assert kinds["bounces"]["rate"] == "1.0 %"
    assert kinds["sent"]["messages"] == "4000"
    assert [row["messages"] for row in rows if row["kind"] == "minute"] == [
        "1000",
        "0",
        "0",
        "3000",
    ]


def hostile_report(issue: Issue) -> ClickReport:
    return build_report(
        outline(hostile(issue)),
        fixed_counts(),
        SendSummary(1, {}),
        list_name="main",
        mode="aggregate",
        min_count=5,
    )


def test_csv_cells_never_run_as_formulas(issue: Issue) -> None:
    titles = [row["title"] for row in csv_rows(hostile_report(issue)) if row["kind"] == "item"]
    assert titles[0] == '\'=HYPERLINK("https://evil.example")'
    assert titles[1].startswith("<script>")  # a spreadsheet shows text; the page escapes it


def test_the_html_is_one_file_with_nothing_to_run_or_fetch(issue: Issue) -> None:
    page = render_html(fixed_report(issue), language="zh-CN")
    assert "<script" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "default-src 'none'" in page
    assert "prefers-color-scheme: dark" in page
    assert page.count("<svg") == 2
    assert 'lang="zh-CN"' in page


def test_hidden_figures_show_as_below_in_the_html_and_its_charts(issue: Issue) -> None:
    report = fixed_report(issue)
    page = render_html(report)
    assert "&lt; 5" in page
    chart = clicks_chart(report)
    values = re.findall(r'<text[^>]*class="value"[^>]*>([^<]*)</text>', chart)
    assert "&lt; 5" in values
    assert "3" not in values  # 1.2's three readers are drawn as "< 5", not as 3
    assert "<script" not in chart
    assert "<!--" not in chart
    assert 'role="img"' in chart
    hidden = [line for s in report.sections for line in s.lines if line.people == Below(5)]
    assert hidden


def test_titles_are_escaped_in_the_page_and_the_chart(issue: Issue) -> None:
    report = hostile_report(issue)
    for markup in (render_html(report), clicks_chart(report)):
        assert "<script>alert(1)" not in markup
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in markup


def test_the_delivery_chart_draws_every_minute(issue: Issue) -> None:
    chart = delivery_chart(fixed_report(issue))
    assert len(re.findall(r'<rect[^>]*class="rect reactive tooltip-trigger"', chart)) == 4
    assert "09:00" in chart
    assert 'aria-label="Messages sent per minute from 2026-11-01 09:00 UTC' in chart
