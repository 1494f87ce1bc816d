"""A ClickReport in; the report as terminal text, and as CSV for a spreadsheet, out.

Both show only what the report holds: a figure under the limit is "< 5" here as everywhere, one
hidden only to protect another is "hidden", explained once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TextIO

from rich.cells import cell_len

from newsletter.clicks.report import ClickReport, Count, Line, lines, shown, withheld_note
from newsletter.config.settings import TrackingMode
from newsletter.formats.safetext import printable
from newsletter.spreadsheet import write_rows

CSV_COLUMNS = ("kind", "section", "item", "title", "people", "machines", "messages", "rate")
TEXT_ROWS = 15  # lines of the delivery over time; a longer send is summed into this many
_FIGURE = 10  # columns per figure in the text table
PEOPLE = {
    "readers": "readers who clicked, each counted once",
    "requests": "people's requests, a repeat within a minute counted once",
}

MODES = {
    TrackingMode.OFF: 'not measured ([tracking] clicks = "off")',
    TrackingMode.AGGREGATE: "counted per link; nothing about a person is kept",
    TrackingMode.PER_READER: "counted per reader, by outbox row",
}


def render_text(report: ClickReport, width: int = 100) -> str:
    """The report for a terminal `width` columns wide (CJK titles count double)."""
    out = [
        f"Issue {report.issue} · {printable(report.title)} · list {printable(report.list_name)}",
        f"Clicks: {MODES[report.mode]}; figures under {report.min_count} show as "
        f'"< {report.min_count}".',
    ]
    if report.withholds:
        out.append(withheld_note(report.min_count) + ".")
    if report.mode != "off":
        out += ["", *_click_table(report, width), ""]
        out.append(
            "Machine requests by rule: "
            + " · ".join(f"{rule} {shown(count)}" for rule, count in report.rules)
        )
    out += ["", *_delivery(report)]
    return "\n".join(out) + "\n"


def _click_table(report: ClickReport, width: int) -> list[str]:
    label_width = max(cell_len(line.label) for line in lines(report))
    title_width = max(12, width - label_width - 2 * (_FIGURE + 1) - 1)
    head = _cells("", "", "people", "machines", label_width, title_width)
    return [
        f"people: {PEOPLE[report.people_are]}; machines: requests the rules below tell apart",
        "",
        head,
        *(_text_line(line, label_width, title_width) for line in lines(report)),
    ]


def _text_line(line: Line, label_width: int, title_width: int) -> str:
    return _cells(
        line.label, line.title, shown(line.people), shown(line.machines), label_width, title_width
    )


def _cells(label: str, title: str, people: str, machines: str, lw: int, tw: int) -> str:
    title = fit(printable(title), tw)
    row = f"{label}{' ' * (lw - cell_len(label))} {title}{' ' * (tw - cell_len(title))}"
    return f"{row} {people:>{_FIGURE}} {machines:>{_FIGURE}}".rstrip()


def fit(text: str, width: int) -> str:
    """`text` cut to `width` terminal columns, with an ellipsis when cut."""
    if cell_len(text) <= width:
        return text
    kept = []
    used = 1
    for char in text:
        used += cell_len(char)
        if used > width:
            break
        kept.append(char)
    return "".join(kept) + "…"


def _delivery(report: ClickReport) -> list[str]:
    outcomes = " · ".join(f"{o.name} {shown(o.count)} ({o.rate})" for o in report.outcomes)
    if not report.sent_over_time:
        return [f"Sent: {report.sent:,} messages.", outcomes[0].upper() + outcomes[1:]]
    first, last = report.sent_over_time[0][0], report.sent_over_time[-1][0]
    end = last + dt.timedelta(minutes=report.bucket)
    busiest = max(sent for _, sent in report.sent_over_time)
    per = "a minute" if report.bucket == 1 else f"per {report.bucket} minutes"
    out = [
        f"Sent: {report.sent:,} messages, {_when(first, first)} to {_when(end, first)} UTC "
        f"(busiest {busiest:,} {per})",
    ]
    for start, minutes, sent in _summed(report):
        out.append(f"  {_when(start, first):>11}  {sent:>9,}  ({minutes} min)")
    out.append(outcomes[0].upper() + outcomes[1:])
    return out


def _summed(report: ClickReport) -> Iterator[tuple[dt.datetime, int, int]]:
    """The delivery over time in at most TEXT_ROWS lines: (start, minutes, messages)."""
    series = report.sent_over_time
    step = -(-len(series) // TEXT_ROWS)
    for n in range(0, len(series), step):
        chunk = series[n : n + step]
        yield chunk[0][0], len(chunk) * report.bucket, sum(sent for _, sent in chunk)


def _when(moment: dt.datetime, first: dt.datetime) -> str:
    return moment.strftime("%H:%M" if moment.date() == first.date() else "%m-%d %H:%M")


def write_report_csv(report: ClickReport, handle: TextIO) -> int:
    """The report as CSV, one line per figure's row, the `kind` column saying which: the click
    table (issue, intro, section, section-text, item, outro), each machine `rule`, then `sent`,
    the outcomes (messages and rate) and each `minute` of the delivery. The rows written."""
    return write_rows(CSV_COLUMNS, _csv_rows(report), handle)


def _csv_rows(report: ClickReport) -> Iterator[list[object]]:
    if report.mode != "off":
        for line in lines(report):
            kind, section, item = _kind(line)
            yield [
                kind,
                section,
                item,
                line.title,
                _cell(line.people),
                _cell(line.machines),
                "",
                "",
            ]
        for rule, count in report.rules:
            yield ["rule", "", "", str(rule), "", _cell(count), "", ""]
    yield ["sent", "", "", "", "", "", report.sent, ""]
    for outcome in report.outcomes:
        yield [outcome.name, "", "", "", "", "", _cell(outcome.count), outcome.rate]
    for start, sent in report.sent_over_time:
        yield ["minute", "", "", start.isoformat(), "", "", sent, ""]


def _kind(line: Line) -> tuple[str, object, object]:
    if line.label in ("intro", "outro"):
        return line.label, "", ""
    if line.label == "all":
        return "issue", "", ""
    section, _, item = line.label.partition(".")
    if not item:
        return "section", int(section), ""
    if item == "0":
        return "section-text", int(section), ""
    return "item", int(section), int(item)


def _cell(count: Count) -> object:
    return shown(count) if not isinstance(count, int) else count
