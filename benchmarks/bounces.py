"""The bounce loop's costs, each next to a reference measured in the same run, printed as a table.

1. Classifying returned mail: read_report over the mails of tests/data/bounces/ (DSN, ARF,
   auto-reply, flufl.bounce fallback), against email.message_from_bytes of the same mails (the
   parsing every classifier pays anyway).
2. VERP: MessageFactory.build with a row id (return path + signed tag + header) against the same
   factory without one, on issue 14.
3. The send's rate guard: one run_totals reading on a SQLite outbox of N sent rows, against
   counts() of the same (issue, list) (what `status` reads).

Run: `.venv/bin/python benchmarks/bounces.py [--rows N]`.
"""

from __future__ import annotations

import argparse
import email
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from newsletter.bounces.reports import read_report
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory
from newsletter.models import DeliveryStatus, Subscriber
from newsletter.outbox import open_outbox
from newsletter.outbox.records import now
from newsletter.render import render_issue
from newsletter.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "bounces"
SECRET = b"benchmark-secret-0123456789abcdef"


def median_us(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def classify() -> tuple[float, float]:
    mails = [p.read_bytes() for p in sorted(CORPUS.glob("*.eml"))]
    # Interleaved, so both see the same machine load.
    ours, reference = [], []
    for _ in range(20):
        ours.append(median_us(lambda: [read_report(m) for m in mails], 1) / len(mails))
        reference.append(
            median_us(lambda: [email.message_from_bytes(m) for m in mails], 1) / len(mails)
        )
    return statistics.median(ours), statistics.median(reference)


def verp() -> tuple[float, float]:
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    bounces = settings.bounces.model_copy(update={"return_path": "bounces@news.example.org"})
    settings = settings.model_copy(update={"bounces": bounces})
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    factory = MessageFactory(rendered, settings, "main", secret=SECRET)
    reader = Subscriber(envelope="reader@example.org", name="读者")
    tagged, plain = [], []
    for i in range(2000):
        tagged.append(median_us(lambda i=i: factory.build(reader, None, i), 1))
        plain.append(median_us(lambda: factory.build(reader), 1))
    return statistics.median(tagged), statistics.median(plain)


def guard(rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        outbox = open_outbox(Path(folder) / "outbox.sqlite3")
        readers = [f"reader{i}@example.org" for i in range(rows)]
        outbox.plan(14, "main", readers)
        since = now()
        for row in outbox.due(14, "main"):
            outbox.record(row.id, DeliveryStatus.SENT, code=250, reply="ok")
        totals = median_us(lambda: outbox.run_totals(14, "main", since), 15)
        counts = median_us(lambda: outbox.counts(14, "main"), 15)
        outbox.close()
    return totals, counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    ours, reference = classify()
    tagged, plain = verp()
    totals, counts = guard(args.rows)
    print("| figure | measured | reference (same run) | ratio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| read_report, per mail of the corpus | {ours:.0f} µs"
        f" | email.message_from_bytes {reference:.0f} µs | {ours / reference:.1f}× |"
    )
    print(
        f"| MessageFactory.build with VERP (issue 14) | {tagged:.0f} µs"
        f" | without {plain:.0f} µs | {tagged / plain:.2f}× |"
    )
    print(
        f"| rate guard reading, {args.rows:,} sent rows | {totals / 1000:.1f} ms"
        f" | counts() {counts / 1000:.1f} ms | {totals / counts:.1f}× |"
    )


if __name__ == "__main__":
    main()
