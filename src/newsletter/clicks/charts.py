"""A ClickReport in; its charts as SVG markup to inline in the HTML report out (pygal).

Drawn on the server, static: pygal always writes a `<script>` with its configuration (for its
tooltips), which is taken out, with its comments, before the markup leaves here. Colours are
CSS custom properties of the page (--people, --machines, --ink, --rule), so one chart follows the
page's light or dark scheme. A hidden figure is drawn as no bar, labelled as the tables label it
("< 5", or "hidden"): the length of a bar never tells what its label hides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pygal
from pygal.etree import etree
from pygal.style import Style

from newsletter.clicks.report import Below, ClickReport, Count, Line, Withheld, lines, shown

WIDTH = 400  # the SVG's own width: drawn at about this size on a phone, so its text stays legible
_STYLE = Style(
    background="transparent",
    plot_background="transparent",
    foreground="var(--ink)",
    foreground_strong="var(--ink)",
    foreground_subtle="var(--rule)",
    colors=("var(--people)", "var(--machines)"),
    # The values are printed past the end of their bar, on the page's background: in its ink.
    # (pygal's default picks white or black from the bar's colour, and reads a CSS variable as
    # light: white on white in the light scheme.)
    value_colors=("var(--ink)", "var(--ink)"),
    font_family="system-ui, -apple-system, 'Segoe UI', 'Noto Sans', sans-serif",
    label_font_size=12,
    major_label_font_size=12,
    value_font_size=12,
    legend_font_size=13,
    title_font_size=14,
    opacity="1",
    opacity_hover="1",
    transition="none",
)
_COMMON: dict[str, Any] = {
    "style": _STYLE,
    "js": [],
    "disable_xml_declaration": True,
    "explicit_size": False,
    "width": WIDTH,
    "show_legend": True,
    "legend_at_bottom": True,
    "legend_at_bottom_columns": 2,
    "print_values": True,
    "tooltip_fancy_mode": False,
    "margin": 8,
}


def clicks_chart(report: ClickReport) -> str:
    """People's clicks and machine requests per line of the click table, labelled by place."""
    sums = {id(section.total) for section in report.sections} | {id(report.total)}
    rows = [row for row in lines(report) if id(row) not in sums]  # sums would dwarf the rest
    rows.reverse()  # pygal draws the first bar at the bottom; the issue reads top down
    chart = pygal.HorizontalBar(
        **_COMMON,
        height=96 + 34 * max(1, len(rows)),
        x_labels=[row.label for row in rows],
        show_y_guides=True,
        print_values_position="top",
        margin_right=56,
        y_labels=whole_ticks(max((_shown_figure(r) for r in rows), default=0)),
    )
    chart.uuid = "clicks"
    chart.add(f"people ({report.people_are})", [_bar(row.people) for row in rows])
    chart.add("machine requests", [_bar(row.machines) for row in rows])
    description = "; ".join(
        f"{row.label} {row.title}: people {shown(row.people)}, machines {shown(row.machines)}"
        for row in reversed(rows)
    )
    return _static(chart, f"Clicks per link of issue {report.issue}: {description}", _after_bars)


def delivery_chart(report: ClickReport) -> str:
    """Messages sent per minute (or per bucket of minutes) over the send."""
    series = report.sent_over_time
    every = max(1, len(series) // 6)
    chart = pygal.Bar(
        **{**_COMMON, "print_values": False, "show_legend": False},
        height=240,
        x_labels=[start.strftime("%H:%M") for start, _ in series],
        x_labels_major_every=every,
        show_minor_x_labels=False,
        truncate_label=-1,
        show_x_guides=False,
        y_labels=whole_ticks(max((sent for _, sent in series), default=0)),
    )
    chart.uuid = "delivery"
    per = "minute" if report.bucket == 1 else f"{report.bucket} minutes"
    chart.add(f"messages sent per {per}", [sent for _, sent in series])
    first = series[0][0].strftime("%Y-%m-%d %H:%M") if series else "-"
    busiest = max((sent for _, sent in series), default=0)
    return _static(
        chart,
        f"Messages sent per {per} from {first} UTC: {len(series)} bars, busiest {busiest:,}",
    )


def whole_ticks(top: int, most: int = 6) -> list[int]:
    """The value axis's ticks: clicks and messages are whole numbers, so whole numbers from 0
    to `top` or just past it, in steps of 1, 2 or 5 times a power of ten, at most `most` + 1
    of them (pygal's own ticks step by 0.1 when the figures are small or all hidden)."""
    top = max(top, 1)
    step, scale = 1, 1
    while math.ceil(top / step) > most:
        for factor in (2, 5, 10):
            step = factor * scale
            if math.ceil(top / step) <= most:
                break
        scale *= 10
    return list(range(0, math.ceil(top / step) * step + 1, step))


def _shown_figure(line: Line) -> int:
    """The line's largest figure that is shown (a hidden one is drawn as no bar)."""
    return max((f for f in (line.people, line.machines) if isinstance(f, int)), default=0)


def _bar(count: Count) -> dict[str, Any]:
    if isinstance(count, (Below, Withheld)):
        return {"value": 0, "formatter": lambda _: str(count)}
    return {"value": count, "formatter": lambda value: f"{value:,.0f}"}


def _after_bars(root: Any) -> None:
    """Each value's label just past the end of its bar, not across it (pygal centres it on
    the end, where it would be drawn over the bar's colour)."""
    for text in root.iter():
        if isinstance(text.tag, str) and text.get("class") == "value":
            text.set("text-anchor", "start")
            text.set("x", f"{float(text.get('x', '0')) + 4:.1f}")


def _static(chart: pygal.graph.graph.Graph, label: str, *fixes: Callable[[Any], None]) -> str:
    """The chart's SVG with no script and no comment, named for assistive technology."""
    root = chart.render_tree()
    for fix in fixes:
        fix(root)
    for parent in list(root.iter()):
        for child in list(parent):
            tag = child.tag if isinstance(child.tag, str) else ""  # a comment's is a function
            if not tag or tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    root.set("role", "img")
    root.set("aria-label", label)
    markup: str = etree.tostring(root, encoding="unicode")
    if "<script" in markup.lower():  # pygal changed how it writes scripts: never ship one
        raise RuntimeError("the chart still holds a script")
    return markup
