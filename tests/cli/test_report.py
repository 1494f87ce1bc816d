"""`newsletter report` as a user runs it: nothing sent yet, the one list an issue went to chosen
for them, several lists named, an unknown list refused, the HTML and CSV files written, and a
path that cannot be written told in one line."""

from __future__ import annotations

import csv
import io
import time
from html.parser import HTMLParser
from pathlib import Path

from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.database import open_database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.rendering.places import Place, Region
from support.database import plan
from support.tracked import tracked_send

ENV = {"NEWSLETTER_SECRET": "report-tests-secret-0123456789abcdef"}
TRACKED = {**ENV, "NEWSLETTER_TRACKING__CLICKS": "aggregate", "NEWSLETTER_PRIVACY__MIN_COUNT": "2"}


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env or TRACKED)
    return result.exit_code, result.stdout, result.stderr


def sent(project: Path, list_name: str = "main", clicks: int = 3) -> None:
    settings = load_settings(project / "newsletter.toml", environ=TRACKED)
    tracked_send(settings, [f"r{n}@example.com" for n in range(4)], list_name=list_name)
    event = ClickRecord(
        time.time(), Place(Region.TITLE, 0, 0), "GET", False, "browser:edge", "", None, None
    )
    with open_database(settings.database_target) as database:
        database.clicks.add(
            [
                StoredClick(14, list_name, event._replace(ip=f"198.51.100.{n}"))
                for n in range(clicks)
            ]
        )


def test_nothing_sent_yet(project: Path) -> None:
    assert run("report", "--issue", "14") == (
        0,
        "issue 14: nothing sent yet (no delivery log)\n",
        "",
    )


def test_the_one_list_it_went_to_and_the_files(project: Path) -> None:
    sent(project)
    code, out, err = run("report", "--issue", "14", "--html", "report.html", "--csv", "report.csv")
    assert code == 0, err
    assert out.startswith("Issue 14 · ")
    assert "list main" in out
    assert "counted per link; nothing about a person is kept" in out
    page = (project / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "<script" not in page
    rows = list(csv.DictReader(io.StringIO((project / "report.csv").read_text(encoding="utf-8"))))
    (first,) = [r for r in rows if r["kind"] == "item" and (r["section"], r["item"]) == ("1", "1")]
    assert first["people"] == "3"
    assert [r["messages"] for r in rows if r["kind"] == "sent"] == ["4"]
    assert "wrote report.html" in err
    assert "rows to report.csv" in err


def test_csv_to_stdout_is_the_csv_alone(project: Path) -> None:
    sent(project)
    code, out, _ = run("report", "--issue", "14", "--csv", "-")
    assert code == 0
    assert out.splitlines()[0] == "kind,section,item,title,people,machines,messages,rate"


def test_several_lists_are_named_and_a_test_send_is_set_apart(project: Path) -> None:
    sent(project, "staging")
    sent(project, "main")
    code, out, _ = run("report", "--issue", "14")
    assert code == 0
    assert "list main" in out  # the staging list's test send is not the send
    settings = load_settings(project / "newsletter.toml", environ=TRACKED)
    with open_database(settings.database_target) as database:
        plan(database, 14, "other", ["x@example.com"])
    code, _, err = run("report", "--issue", "14")
    assert code == 1
    assert "error: issue 14 went to 2 lists (main, other)" in err
    assert "hint: Say which with --list" in err
    code, out, _ = run("report", "--issue", "14", "--list", "staging")
    assert (code, "list staging" in out) == (0, True)


def test_an_unknown_list_and_an_unwritable_path_are_one_line_each(project: Path) -> None:
    sent(project)
    code, _, err = run("report", "--issue", "14", "--list", "nope")
    assert code == 1
    assert err.startswith("error: ")
    assert "nope" in err
    code, _, err = run("report", "--issue", "14", "--html", "missing/folder/report.html")
    assert code == 1
    assert "Traceback" not in err
    assert err.startswith("error: ")


def flood(project: Path, per_item: dict[int, int]) -> None:
    """Issue 14 sent to four readers, and people's clicks on the items of its second section
    (分析: 2.1 to 2.4), each from an address of its own."""
    settings = load_settings(project / "newsletter.toml", environ=FIVE)
    tracked_send(settings, [f"r{n}@example.com" for n in range(4)])
    start = time.time() - 3600
    clicks = []
    for item, count in per_item.items():
        for n in range(count):
            event = ClickRecord(
                start + n,
                Place(Region.TITLE, 1, item),
                "GET",
                False,
                "browser:edge",
                "",
                None,
                None,
            )
            ip = f"2001:db8:{item:x}::{n:x}"
            clicks.append(StoredClick(14, "main", event._replace(ip=ip)))
    with open_database(settings.database_target) as database:
        database.clicks.add(clicks)


FIVE = {**TRACKED, "NEWSLETTER_PRIVACY__MIN_COUNT": "5"}


def test_a_figure_hidden_to_protect_another_is_not_called_small(project: Path) -> None:
    # Issue 29, point 11: 2.4's 2 readers are "< 5"; 2.3's 12 is hidden so that the section's
    # total cannot give the 2 away, and the issue's 684 so that it cannot give section 1's 0
    # away. Neither is small: both say "hidden", and a note says why.
    flood(project, {0: 536, 1: 134, 2: 12, 3: 2})
    code, out, err = run(
        "report", "--issue", "14", "--csv", "report.csv", "--html", "r.html", env=FIVE
    )
    assert code == 0, err
    text = {
        line.split()[0]: line.split()[-3] for line in out.splitlines() if line[:2] in ("2 ", "2.")
    }
    assert text == {"2": "684", "2.1": "536", "2.2": "134", "2.3": "hidden", "2.4": "5"}  # "< 5"
    assert '"hidden": a figure of 5 or more, hidden so that a total cannot give away' in out
    total = next(line for line in out.splitlines() if line.startswith("all "))
    assert total.split()[-3:] == ["hidden", "<", "5"]
    rows = list(csv.DictReader(io.StringIO((project / "report.csv").read_text(encoding="utf-8"))))
    people = {(r["kind"], r["section"], r["item"]): r["people"] for r in rows}
    assert people[("item", "2", "3")] == "hidden"
    assert people[("item", "2", "4")] == "< 5"
    assert people[("section", "1", "")] == "< 5"
    assert people[("issue", "", "")] == "hidden"
    page = (project / "r.html").read_text(encoding="utf-8")
    assert "a figure of 5 or more, hidden so that a total cannot give away" in page


def test_a_rate_bound_is_never_over_100_percent(project: Path) -> None:
    # Issue 29, point 12: no bounce of 4 messages, under 5, once read "< 125 %".
    flood(project, {0: 1})
    code, out, err = run("report", "--issue", "14", "--csv", "report.csv", env=FIVE)
    assert code == 0, err
    assert "Bounces < 5 (n/a: fewer than 5 sent)" in out
    assert "%" not in out.rsplit("\n", 2)[-2]
    rows = list(csv.DictReader(io.StringIO((project / "report.csv").read_text(encoding="utf-8"))))
    assert {r["kind"]: r["rate"] for r in rows}["bounces"] == "n/a: fewer than 5 sent"


class _Page(HTMLParser):
    """The report page read as a browser would: its style sheets, and each chart's axis labels
    (the `text` elements of a `g` whose class holds "axis" and "x" or "y")."""

    def __init__(self) -> None:
        super().__init__()
        self.styles: list[str] = []
        self.ticks: dict[tuple[str, str], list[str]] = {}  # (chart id, axis) -> labels
        self._chart = ""
        self._open: list[tuple[str, set[str]]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = set((found.get("class") or "").split())
        if tag == "svg":
            self._chart = found.get("id") or ""
        self._open.append((tag, classes))
        self._in = tag

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.styles.append(data)
        elif self._in == "text":
            axes = [c for t, c in self._open if t == "g" and "axis" in c]
            if axes:
                axis = "x" if "x" in axes[-1] else "y"
                self.ticks.setdefault((self._chart, axis), []).append(data.strip())


def _declarations(css: str) -> list[tuple[str, dict[str, str]]]:
    """A style sheet's rules as (selector, {property: value}), @media blocks left out."""
    rules = []
    depth, selector, body = 0, "", ""
    for char in css:
        if char == "{":
            depth += 1
            if depth == 1:
                selector, body = body.strip(), ""
                continue
        elif char == "}":
            depth -= 1
            if depth == 0:
                if not selector.startswith("@"):
                    pairs = (d.split(":", 1) for d in body.split(";") if ":" in d)
                    rules.append((selector, {k.strip(): v.strip() for k, v in pairs}))
                selector, body = "", ""
                continue
        body += char
    return rules


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_charts_labels_are_legible_and_count_in_whole_numbers(project: Path) -> None:
    # The trap of issue 29: the bar labels were white on the light page's white, and with few
    # clicks the axis counted 0, 0.1, 0.2 ... Both charts, through `report --html`.
    flood(project, {0: 3, 1: 1})
    code, _, err = run("report", "--issue", "14", "--html", "r.html", env=FIVE)
    assert code == 0, err
    page = _Page()
    page.feed((project / "r.html").read_text(encoding="utf-8"))
    rules = [rule for sheet in page.styles for rule in _declarations(sheet)]
    light = next(props for selector, props in rules if selector == ":root")
    colours = {name: value for name, value in light.items() if name.startswith("--")}
    value_fills = [
        props["fill"]
        for selector, props in rules
        if ".text-overlay" in selector and selector.endswith(" text") and "fill" in props
    ]
    assert value_fills  # the people's and the machines' value labels
    for fill in value_fills:
        colour = colours.get(fill.removeprefix("var(").removesuffix(")"), fill)
        assert colour.startswith("#"), fill  # a colour of the page's scheme, not "white"
        assert _contrast(colour, colours["--bg"]) >= 4.5, (fill, colours["--bg"])
    clicks, delivery = page.ticks[("chart-clicks", "x")], page.ticks[("chart-delivery", "y")]
    for labels in (clicks, delivery):
        assert labels, page.ticks
        assert all(label.isdigit() for label in labels), labels
    assert clicks == ["0", "1"]  # every figure is hidden: no bar, and an axis of 0 to 1
