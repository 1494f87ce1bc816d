"""Welcome sequences at 100,000 enrolled readers, on SQLite and on a throwaway PostgreSQL cluster
(tests/support/postgres.py, when its binaries are installed), each figure beside a reference
measured in the same run on the same backend:

- finding the due steps: the duty's query for a page of due readers (500) among 100,000
  enrolled, when some are due and when none is (a look's usual case), against a plain
  `SELECT count(*) FROM enrolments` over the same table;
- a worker's cost per due step: one look of the duty (find, plan each reader's row and move
  their enrolment, send through the engine) for `--due` readers, against the send engine alone
  sending the same number of rows of the same step, planned beforehand, just before and just
  after the look (the faster is the reference; the cost the sequence adds is the ratio's excess
  over 1).

Both send to the test suite's aiosmtpd server (tests/support/smtp.py) as its own process on
loopback. Run: `.venv/bin/python benchmarks/sequences.py [--readers N] [--due N] [--no-postgres]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from newsletter.config.settings import Settings, load_settings
from newsletter.database import Database, open_database
from newsletter.database.records import now
from newsletter.issues.sequencefiles import load_sequence
from newsletter.mail.tokens import signing_key
from newsletter.models import DeliveryStatus
from newsletter.sequences.duty import SequenceDuty
from newsletter.sequences.steps import StepMails, deliver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.postgres import binaries, start_cluster  # noqa: E402
from support.project import copy_project  # noqa: E402

SECRET = "benchmark-secret-0123456789abcdef"
DAY = 86400.0


def median_ms(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def write_sequence(root: Path) -> None:
    folder = root / "sequences" / "welcome"
    folder.mkdir(parents=True)
    steps = [("01-hello", "0s", "lists: [main]\n"), ("02-tips", "1d", "")]
    for name, after, lists in steps:
        text = f"---\ntitle: {name}\nafter: {after}\n{lists}---\nThe words of {name}.\n"
        (folder / f"{name}.md").write_text(text, encoding="utf-8")


def fill(database: Database, readers: int, due: int, moment: float) -> None:
    """`readers` confirmed on main and enrolled, all past step 1; `due` of them a day ago (step
    2 due now), the others just now."""
    stamp = now()
    keys = [f"reader{n:06d}@example.org" for n in range(readers)]
    with database.backend.transaction():
        database.backend.many(
            "INSERT INTO subscribers (list, address, address_key, mailbox_key, name, status,"
            " source, created_at, confirmed_at, updated_at)"
            " VALUES ('main', ?, ?, ?, '', 'confirmed', 'cli', ?, ?, ?)",
            [(k, k, k, stamp, stamp, stamp) for k in keys],
        )
        database.backend.many(
            "INSERT INTO enrolments (sequence, list, address_key, joined_at, step, last_at,"
            " source) VALUES ('welcome', 'main', ?, ?, 1, ?, 'bench')",
            [
                (k, moment - 2 * DAY, moment - 2 * DAY if n < due else moment)
                for n, k in enumerate(keys)
            ],
        )
    if database.shared:
        # PostgreSQL plans by the table's statistics, which autovacuum gathers a while after a
        # load this size: an outbox that has run a while has them, so the run has them too.
        database.backend.run("ANALYZE enrolments")
        database.backend.run("ANALYZE subscribers")


def settings_for(root: Path, port: int) -> Settings:
    settings = load_settings(root / "newsletter.toml", environ={})
    return settings.model_copy(
        update={
            "smtp": settings.smtp.model_copy(update={"host": "127.0.0.1", "port": port}),
            "schedule": settings.schedule.model_copy(update={"quiet_hours": ""}),
            "worker": settings.worker.model_copy(update={"concurrency": 4}),
            "send": settings.send.model_copy(update={"rate": 0.0}),
            "secret": SecretStr(SECRET),
        }
    )


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    portfile = folder / "port"
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "smtp.py"),
            str(portfile),
            os.devnull,
            "0",
        ]
    )
    deadline = time.monotonic() + 60
    while not portfile.exists() or not portfile.read_text():
        if time.monotonic() > deadline:
            raise SystemExit("the SMTP server did not start")
        time.sleep(0.05)
    return server, int(portfile.read_text())


async def look(settings: Settings, moment: float) -> float:
    duty = SequenceDuty(
        settings, signing_key(settings, allow_ephemeral=False), "bench", print, clock=lambda: moment
    )
    await duty.start()
    started = time.perf_counter()
    await duty.look()
    seconds = time.perf_counter() - started
    await duty.stop()
    return seconds


async def engine_alone(settings: Settings, database: Database, due: int, list_name: str) -> float:
    """The same step's rows for `due` other readers planned beforehand, sent by the engine."""
    step = load_sequence(settings.resolve(Path("sequences")), "welcome").step(2)
    key = database.enrolments.step_key("welcome", 2)
    mail = StepMails(settings, signing_key(settings, allow_ephemeral=False)).get(
        step, key, list_name
    )
    stamp = now()
    with database.backend.transaction():
        database.backend.many(
            "INSERT INTO deliveries (issue, list, recipient, envelope, name, message_id,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, '', ?, ?, ?)",
            [
                (
                    key,
                    list_name,
                    f"ref{n}@example.org",
                    f"ref{n}@example.org",
                    mail.factory.message_id_of(f"ref{n}@example.org"),
                    stamp,
                    stamp,
                )
                for n in range(due)
            ],
        )
    started = time.perf_counter()
    await deliver(mail, database, settings)
    return time.perf_counter() - started


def measure(root: Path, port: int, url: str, readers: int, due: int) -> None:
    """Every figure on the outbox at `url` ("" for the project's SQLite file), printed."""
    settings = settings_for(root, port)
    extra = dict.fromkeys(("before", "after"), settings.lists["main"])
    settings = settings.model_copy(
        update={
            "lists": {**settings.lists, **extra},
            "outbox": settings.outbox.model_copy(update={"url": url}),
        }
    )
    moment = time.time()
    with open_database(settings.database_target) as database:
        fill(database, readers, due, moment)
        enrolments = database.enrolments
        count = median_ms(lambda: database.backend.fetch("SELECT count(*) FROM enrolments"), 21)
        some = median_ms(
            lambda: enrolments.due("welcome", 1, 2, moment - DAY, from_joining=False), 21
        )
        none = median_ms(
            lambda: enrolments.due("welcome", 1, 2, moment - 3 * DAY, from_joining=False), 21
        )
        before = asyncio.run(engine_alone(settings, database, due, "before"))
    duty = asyncio.run(look(settings, moment))
    with open_database(settings.database_target) as database:
        after = asyncio.run(engine_alone(settings, database, due, "after"))
        sent = database.deliveries.counts(database.enrolments.step_key("welcome", 2), "main")
    # The engine alone just before and just after the look; the faster is the reference (the
    # stricter choice, on a machine whose load swings).
    reference = min(before, after)
    cpus, python = os.cpu_count(), sys.version.split()[0]
    backend = "PostgreSQL" if url else "SQLite"
    print(f"\nwelcome sequences, {backend}, {readers:,} readers enrolled, {cpus} CPUs, {python}")
    print("| figure | ms | x reference |")
    print("| --- | --- | --- |")
    rows = [
        ("reference: SELECT count(*) FROM enrolments (median of 21)", count),
        (f"find a page (500) of due readers, {due:,} due", some),
        ("find the due readers, none due (a look's usual case)", none),
    ]
    for name, value in rows:
        print(f"| {name} | {value:.2f} | {value / count:.2f} |")
    per_step, per_row = duty / due * 1e3, reference / due * 1e3
    print("\n| figure | ms per step | x reference |")
    print("| --- | --- | --- |")
    rows = [
        (f"reference: the send engine alone, {due:,} rows of the step planned", per_row),
        (f"one look of the duty: find + plan + send {due:,} due steps", per_step),
    ]
    for name, value in rows:
        print(f"| {name} | {value:.3f} | {value / per_row:.2f} |")
    print(f"(the look sent {sent[DeliveryStatus.SENT]:,} of them)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=2_000)
    parser.add_argument(
        "--no-postgres", action="store_true", help="SQLite only (no throwaway PostgreSQL)."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nl-bench-seq-") as tmp:
        folder = Path(tmp)
        server, port = start_server(folder)
        try:
            root = copy_project(folder / "sqlite")
            write_sequence(root)
            measure(root, port, "", args.readers, args.due)
            if args.no_postgres or binaries() is None:
                return
            cluster = start_cluster()
            try:
                root = copy_project(folder / "postgres")
                write_sequence(root)
                measure(root, port, cluster.create_database(), args.readers, args.due)
            finally:
                cluster.stop()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
