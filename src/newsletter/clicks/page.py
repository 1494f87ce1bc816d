"""A ClickReport in; the report as one self-contained HTML file out.

One file with nothing to fetch and nothing to run: the styles inline, the charts inline SVG drawn
on the server (clicks/charts.py), and a Content-Security-Policy that forbids scripts and every
load. Light and dark follow the reader's scheme (`prefers-color-scheme`); the tables scroll
sideways on a phone rather than the page. The same markup can be a tab of the preview.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2
from markupsafe import Markup

from newsletter.clicks.charts import clicks_chart, delivery_chart
from newsletter.clicks.report import ClickReport, lines, shown, withheld_note
from newsletter.clicks.rules import ABOUT
from newsletter.clicks.tables import MODES, PEOPLE
from newsletter.rendering.templatecache import page_environment

TEMPLATES = Path(__file__).parent / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    return page_environment(TEMPLATES)


def render_html(report: ClickReport, *, language: str = "en") -> str:
    """The page; `language` is the newsletter's (the issue's titles are in it)."""
    totals = {id(section.total) for section in report.sections} | {id(report.total)}
    series = report.sent_over_time
    per = "minute" if report.bucket == 1 else f"{report.bucket} minutes"
    context = {
        "report": report,
        "language": language,
        "mode": MODES[report.mode],
        "people": PEOPLE[report.people_are],
        "lines": [(line, id(line) in totals) for line in lines(report)],
        "rules": [(rule, count, ABOUT[rule]) for rule, count in report.rules],
        "shown": shown,
        "withheld": withheld_note(report.min_count) if report.withholds else "",
        "per": per,
        "first": series[0][0].strftime("%Y-%m-%d %H:%M") if series else "",
        "last": series[-1][0].strftime("%Y-%m-%d %H:%M") if series else "",
        # pygal builds the SVG as a tree from our values, escaping every text it holds.
        "clicks_chart": Markup(clicks_chart(report)) if report.mode != "off" else "",  # noqa: S704
        "delivery_chart": Markup(delivery_chart(report)) if series else "",  # noqa: S704
    }
    return _environment().get_template("report.html").render(context)
