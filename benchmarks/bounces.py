"""The bounce loop's costs, each next to a reference measured in the same run, printed as a table.

1. Classifying returned mail: read_report over the mails of tests/data/bounces/ (DSN, ARF,
   auto-reply, flufl.bounce fallback), against email.message_from_bytes of the same mails (the
   parsing every classifier pays anyway).
2. VERP: MessageFactory.build with a row id (return path + signed tag + header) against the same
   factory without one, on issue 14.
3. The send's rate guard: one run_totals reading on a SQLite outbox of N sent rows, against
   counts() of the same (issue, list) (what `status` reads).
4. A 60 MB bounce in a Maildir (a qmail bounce returning a 60 MB text), read and classified
   the way `newsletter bounces` does (MaildirInbox: its first MAX_MAIL_BYTES), against reading
   the whole mail and classifying that (what it did before). Each side runs in a fresh process:
   seconds, and the process's peak RSS (imports included).

Run: `.venv/bin/python benchmarks/bounces.py [--rows N]`.
"""

from __future__ import annotations

import argparse
import email
import mailbox
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from newsletter.bounces.reports import read_report
from newsletter.config.settings import load_settings
from newsletter.database import open_database
from newsletter.database.records import now
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory
from newsletter.models import DeliveryStatus, Subscriber
from newsletter.rendering.render import render_issue

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test-only planning helpers in tests/support/
from support.database import due, plan  # noqa: E402

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
        tagged.append(median_us(partial(factory.build, reader, None, i), 1))
        plain.append(median_us(lambda: factory.build(reader), 1))
    return statistics.median(tagged), statistics.median(plain)


def guard(rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        database = open_database(Path(folder) / "outbox.sqlite3")
        readers = [f"reader{i}@example.org" for i in range(rows)]
        plan(database, 14, "main", readers)
        since = now()
        journal = database.journal(None)
        for row in due(database, 14, "main"):
            journal.record(row.id, DeliveryStatus.SENT, code=250, reply="ok")
        journal.commit()
        totals = median_us(lambda: database.bounces.run_totals(14, "main", since), 15)
        counts = median_us(lambda: database.deliveries.counts(14, "main"), 15)
        database.close()
    return totals, counts


# One side of figure 4, run by a fresh interpreter that imports only what `newsletter bounces`
# needs to read and classify: prints seconds, peak RSS in MB (imports included) and the verdict.
_READ_HUGE = """
import mailbox, re, sys, time
from pathlib import Path
from newsletter.bounces.inbox import MaildirInbox
from newsletter.bounces.reports import read_report
folder, how = sys.argv[1:]
start = time.perf_counter()
if how == "capped":
    (mail,) = list(MaildirInbox(Path(folder), "").mails())
    raw = mail.raw
else:
    box = mailbox.Maildir(folder, factory=None, create=False)
    raw = box.get_bytes(next(iter(box.keys())))
kind = read_report(raw).kind.value
seconds = time.perf_counter() - start
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec (the parent's peak).
status = Path("/proc/self/status").read_text()
print(seconds, int(re.search(r"VmHWM:\\s*(\\d+)", status).group(1)) / 1024, kind)
"""


def huge(megabytes: int = 60) -> list[tuple[float, float, str]]:
    """(seconds, peak RSS MB, verdict): read as `newsletter bounces` does, then whole."""
    head = (CORPUS / "qmail-no-mailbox.eml").read_bytes()
    line = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\n"
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(Path(tmp) / "box")
        box = mailbox.Maildir(folder, create=True)
        box.add(head + line * (megabytes * 1024 * 1024 // len(line)))
        for how in ("capped", "whole"):
            done = subprocess.run(
                [sys.executable, "-c", _READ_HUGE, folder, how],
                capture_output=True,
                text=True,
                check=True,
            )
            seconds, peak, kind = done.stdout.split()
            found.append((float(seconds), float(peak), kind))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    ours, reference = classify()
    tagged, plain = verp()
    totals, counts = guard(args.rows)
    (ours_s, ours_mb, ours_kind), (whole_s, whole_mb, whole_kind) = huge()
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
    print(
        f"| a 60 MB bounce from a Maildir, read + classified ({ours_kind})"
        f" | {ours_s:.2f} s, peak RSS {ours_mb:.0f} MB"
        f" | the whole mail ({whole_kind}): {whole_s:.2f} s, peak RSS {whole_mb:.0f} MB"
        f" | {ours_s / whole_s:.3f}× time, {ours_mb / whole_mb:.2f}× memory |"
    )


if __name__ == "__main__":
    main()
