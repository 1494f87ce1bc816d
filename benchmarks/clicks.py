"""The click report for 1,000,000 events, printed as a table (run: `make bench`).

Issue 14's links and a generated send to N / 10.6 recipients over 30 minutes (94,340 for the
default N of 1,000,000): a gateway sweeping every link and the canary at delivery for 30 % of
them, a HEAD sweep for 5 %, and readers clicking up to three items hours later. Each
mode (`per-reader`: events name their row; `aggregate`: they name an address and a browser
family) in a child process of its own, so its peak RSS is its own:

* reference: one pass over the same events counting them per place (collections.Counter), the
  floor of any report that reads every event once;
* labelling and tally (clicks/rules.py, clicks/tally.py), the report value, and its three views
  (text, CSV, HTML with both charts), the events in memory;
* the same events in a SQLite outbox (the send's rows sent over the same 30 minutes): what
  `newsletter report` does, the events streamed from the store in time order
  (clicks/gather.py: read, label, tally, the delivery figures, the report value) and the three
  views, against a bare pass of the same query over the same rows (sqlite3, nothing built).

The events are built, and stored, before the clock starts.
Run: `.venv/bin/python benchmarks/clicks.py [--events N]`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from newsletter.clicks.events import ClickEvent
from newsletter.clicks.gather import gather_report
from newsletter.clicks.page import render_html
from newsletter.clicks.report import SendSummary, build_report
from newsletter.clicks.rules import label
from newsletter.clicks.tables import render_text, write_report_csv
from newsletter.clicks.tally import tally
from newsletter.config.settings import load_settings
from newsletter.database import open_database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.issues import load_issue
from newsletter.rendering.places import CANARY, issue_links, outline

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test-only planning helpers in tests/support/
from support.database import plan  # noqa: E402

START = 1_800_000_000.0
SEND_SECONDS = 1_800.0
EDGE, SAFARI = "browser:edge", "browser:safari"


def generate(count: int, *, per_reader: bool) -> tuple[list[ClickEvent], dict[dt.datetime, int]]:
    """About `count` events (a send to count / 10.6 recipients), in time order."""
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    places = [link.place for link in issue_links(load_issue(settings.issues_dir, 14))]
    rng = random.Random(23)
    recipients = max(1, round(count / 10.6))
    events: list[ClickEvent] = []
    sent: Counter[dt.datetime] = Counter()
    for row in range(recipients):
        delivered = START + SEND_SECONDS * row / recipients
        sent[dt.datetime.fromtimestamp(delivered, dt.UTC).replace(second=0, microsecond=0)] += 1
        ip = f"10.{row % 250}.{row // 250 % 250}.0/24"
        since = (lambda at: at - delivered) if per_reader else (lambda at: None)  # noqa: B023
        reader = row if per_reader else None
        draw = rng.random()
        if draw < 0.30:  # a gateway sweeping every link and the canary at delivery
            begin = delivered + rng.uniform(3, 60)
            for n, place in enumerate([*places, CANARY]):
                at = begin + n * 0.03
                events.append(ClickEvent(at, place, "GET", False, EDGE, ip, since(at), reader))
        elif draw < 0.35:  # a scanner's HEAD sweep
            for n, place in enumerate(places):
                at = delivered + 2 + n * 0.1
                events.append(ClickEvent(at, place, "HEAD", False, EDGE, ip, since(at), reader))
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):  # the reader, hours later
            at = delivered + rng.uniform(600, 86_400)
            place = rng.choice(places)
            events.append(ClickEvent(at, place, "GET", False, SAFARI, ip, since(at), reader))
    events.sort(key=lambda e: e.at)
    return events, dict(sent)


def child(count: int, mode: str) -> dict[str, float]:
    events, per_minute = generate(count, per_reader=mode == "per-reader")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    shape = outline(load_issue(settings.issues_dir, 14))

    start = time.perf_counter()
    floor = Counter(e.place for e in events)
    reference = time.perf_counter() - start

    start = time.perf_counter()
    counts = tally(label(events))
    labelled = time.perf_counter() - start
    delivery = SendSummary(sum(per_minute.values()), per_minute, 120, 4, 37)
    start = time.perf_counter()
    report = build_report(
        shape,
        counts,
        delivery,
        list_name="main",
        mode=mode,  # type: ignore[arg-type]
        min_count=5,
    )
    built = time.perf_counter() - start
    start = time.perf_counter()
    text = render_text(report)
    write_report_csv(report, io.StringIO())
    page = render_html(report, language="zh-CN")
    views = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "events": len(events),
        "reference": reference,
        "labelled": labelled,
        "built": built,
        "views": views,
        "people": counts.people_total,
        "machines": counts.machines_total,
        "places": len(floor),
        "page_kb": len(page.encode()) / 1024,
        "text_lines": text.count("\n"),
        "after_events_mb": before / 1024,
        "peak_mb": peak / 1024,
    }


def store(count: int, mode: str, path: Path) -> None:
    """`count` generated events, and the send's rows sent over its 30 minutes, in a SQLite
    outbox at `path` (a child of its own: the report's child then starts with nothing held)."""
    events, per_minute = generate(count, per_reader=mode == "per-reader")
    with open_database(path) as database:
        plan(
            database,
            14,
            "main",
            [f"reader{n}@example.com" for n in range(sum(per_minute.values()))],
        )
        ((first,),) = database.backend.fetch("SELECT min(id) FROM deliveries")
        done = first
        for minute, sent in sorted(per_minute.items()):
            database.backend.run(
                "UPDATE deliveries SET state = 'sent', sent_at = ? WHERE id >= ? AND id < ?",
                (minute.isoformat(), done, done + sent),
            )
            done += sent
        batch: list[StoredClick] = []
        for event in events:
            row = None if event.row is None else event.row + first
            batch.append(StoredClick(14, "main", ClickRecord(*event._replace(row=row))))
            if len(batch) == 50_000:
                database.clicks.add(batch)
                batch = []
        database.clicks.add(batch)
        database.sent_links.record(14, "main", mode, [])


def child_report(path: Path) -> dict[str, float]:
    """What `newsletter report` does with the outbox at `path`, timed, beside one bare pass of
    the same query."""
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    issue = load_issue(settings.issues_dir, 14)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    db = sqlite3.connect(path)
    start = time.perf_counter()
    cursor = db.execute(
        "SELECT at, region, section, item, link, method, prefetch, agent, ip, since_delivery,"
        " delivery_id FROM clicks WHERE issue = 14 AND list = 'main' ORDER BY at, id"
    )
    events = sum(1 for _ in cursor)
    reference = time.perf_counter() - start
    db.close()
    start = time.perf_counter()
    with open_database(path) as database:
        report = gather_report(database, settings, issue, "main")
    gathered = time.perf_counter() - start
    start = time.perf_counter()
    render_text(report)
    write_report_csv(report, io.StringIO())
    render_html(report, language="zh-CN")
    views = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "events": events,
        "reference": reference,
        "gathered": gathered,
        "views": views,
        "sent": report.sent,
        "start_mb": before / 1024,
        "peak_mb": peak / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--child", choices=["per-reader", "aggregate"])
    parser.add_argument("--store", type=Path, help="(a child) store the events here")
    parser.add_argument("--report", type=Path, help="(a child) report the outbox here")
    args = parser.parse_args()
    if args.report:
        print(json.dumps(child_report(args.report)))
        return
    if args.child and args.store:
        store(args.events, args.child, args.store)
        return
    if args.child:
        print(json.dumps(child(args.events, args.child)))
        return
    print(f"benchmarks/clicks.py  (Python {sys.version.split()[0]})")
    print(
        "| mode | events | reference: Counter pass | label + tally | × reference |"
        " report value | text + CSV + HTML | people / machines | peak RSS (events alone) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("per-reader", "aggregate"):
        out = subprocess.run(
            [sys.executable, __file__, "--events", str(args.events), "--child", mode],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        r = json.loads(out)
        print(
            f"| {mode} | {r['events']:,.0f} | {r['reference']:.2f} s | {r['labelled']:.2f} s"
            f" | {r['labelled'] / r['reference']:.1f}× | {r['built'] * 1000:.1f} ms"
            f" | {r['views'] * 1000:.0f} ms ({r['page_kb']:.0f} KB HTML)"
            f" | {r['people']:,.0f} / {r['machines']:,.0f}"
            f" | {r['peak_mb']:.0f} MB ({r['after_events_mb']:.0f} MB) |"
        )

    print(
        "\n| mode, from a SQLite outbox | events | reference: the query read once | "
        "newsletter report's value | × reference | text + CSV + HTML | peak RSS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("per-reader", "aggregate"):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "outbox.sqlite3"
            events, base = ["--events", str(args.events)], [sys.executable, __file__]
            subprocess.run([*base, *events, "--child", mode, "--store", str(path)], check=True)
            out = subprocess.run(
                [*base, "--report", str(path)], capture_output=True, text=True, check=True
            ).stdout
        r = json.loads(out)
        print(
            f"| {mode} | {r['events']:,.0f} | {r['reference']:.2f} s | {r['gathered']:.2f} s"
            f" | {r['gathered'] / r['reference']:.1f}× | {r['views'] * 1000:.0f} ms"
            f" | {r['peak_mb']:.0f} MB ({r['start_mb']:.0f} MB after imports) |"
        )


if __name__ == "__main__":
    main()
