"""The delivery log's share of a send: one PostgreSQL worker against one SQLite worker, each
durability, and two PostgreSQL workers against one.

Every run is the real `newsletter send` of issue 14 to a generated list (10,000 recipients by
default), 4 SMTP sessions per worker, as a subprocess with a fresh outbox, to Postfix's
smtp-sink on loopback. PostgreSQL is a throwaway cluster on loopback that flushes as a real one
does (fsync on), so `durability = "power"` costs here what it costs on this machine's disk.
The configurations run in turn within each trial (the machine's load drifts; a pair measured
minutes apart would compare loads, not code), `--repeat` trials, and each figure is the median
of its trials; the ratios are taken trial by trial, then their median.

Printed: per configuration the send phase (the command's own summary) and the whole command
(start to exit) in msg/s; then PostgreSQL / SQLite at each durability, "power" / "process" on
each backend, two PostgreSQL workers (started together, the time from the first start to
the last exit) against one, and the whole command (durability "process") against Postfix's
smtp-source sending as many messages of the same size over 4 sessions to the same sink, run at
the start of each trial.

Run: `python benchmarks/outbox.py [--recipients N] [--repeat N]` (needs the Debian packages
postfix and postgresql).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scale import Run, environment, finish, fresh_database, make_project, start_send
from send import free_port, message_size, require_postfix, run_source, start_sink

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.postgres import start_cluster  # noqa: E402

CONFIGS = [
    ("SQLite", "process", 1),
    ("PostgreSQL", "process", 1),
    ("SQLite", "power", 1),
    ("PostgreSQL", "power", 1),
    ("PostgreSQL", "process", 2),
]


@dataclass
class Trial:
    send_rate: float  # msg/s of the send phase (the sum over workers)
    whole: float  # msg/s, start to the last exit


def run(
    project: Path, port: int, admin: str, backend: str, durability: str, workers: int, n: int
) -> Trial:
    shutil.rmtree(project / ".newsletter", ignore_errors=True)
    url = fresh_database(admin, "bench") if backend == "PostgreSQL" else ""
    env = environment(port, url)
    env["NEWSLETTER_OUTBOX__DURABILITY"] = durability
    started = time.perf_counter()
    procs = [start_send(project, env, 4) for _ in range(workers)]
    runs: list[Run] = [finish(p, started) for p in procs]
    sent = sum(r.sent for r in runs)
    if sent != n:
        raise SystemExit(f"{backend} {durability} x{workers}: sent {sent} of {n}")
    return Trial(sum(r.send_rate for r in runs), n / max(r.wall for r in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    require_postfix()
    size = message_size()
    port = free_port()
    sink = start_sink(port)
    cluster = start_cluster(durable=True)
    project = make_project(options.recipients)
    trials: dict[tuple[str, str, int], list[Trial]] = {c: [] for c in CONFIGS}
    load = []
    source: list[float] = []  # smtp-source's msg/s, just before each trial's configurations
    try:
        for _ in range(options.repeat):
            load.append(os.getloadavg()[0])
            source.append(run_source(port, 4, options.recipients, size))
            for config in CONFIGS:
                trials[config].append(
                    run(project, port, cluster.url(), *config, options.recipients)
                )
    finally:
        sink.terminate()
        sink.wait()
        cluster.stop()
        shutil.rmtree(project, ignore_errors=True)
    print(
        f"issue 14, {options.recipients} recipients, {size / 1024:.1f} KB per message, 4 sessions"
        f" per worker, smtp-sink on loopback, {os.cpu_count()} CPUs, Python"
        f" {sys.version.split()[0]}; {options.repeat} trials, load average"
        f" {min(load):.1f}-{max(load):.1f} at their starts"
    )
    print(f"{'outbox':<12} {'durability':<10} {'workers':>7} {'send phase':>12} {'whole cmd':>11}")
    for (backend, durability, workers), found in trials.items():
        phase = statistics.median(t.send_rate for t in found)
        whole = statistics.median(t.whole for t in found)
        print(f"{backend:<12} {durability:<10} {workers:>7} {phase:>8.0f} m/s {whole:>7.0f} m/s")

    def ratio(a: tuple[str, str, int], b: tuple[str, str, int]) -> str:
        phase = [x.send_rate / y.send_rate for x, y in zip(trials[a], trials[b], strict=True)]
        whole = [x.whole / y.whole for x, y in zip(trials[a], trials[b], strict=True)]
        return f"{statistics.median(phase):.2f} (whole command {statistics.median(whole):.2f})"

    print()
    for durability in ("process", "power"):
        pg, lite = ("PostgreSQL", durability, 1), ("SQLite", durability, 1)
        print(f"PostgreSQL / SQLite, {durability:<8}  {ratio(pg, lite)}   (target >= 0.7)")
    for backend in ("SQLite", "PostgreSQL"):
        print(
            f"power / process, {backend:<11} "
            f" {ratio((backend, 'power', 1), (backend, 'process', 1))}"
        )
    two, one = ("PostgreSQL", "process", 2), ("PostgreSQL", "process", 1)
    print(f"2 PostgreSQL workers / 1          {ratio(two, one)}")
    print(f"\nsmtp-source (4 sessions)          {statistics.median(source):.0f} m/s")
    for backend in ("SQLite", "PostgreSQL"):
        found = trials[(backend, "process", 1)]
        wholes = [t.whole / ref for t, ref in zip(found, source, strict=True)]
        phases = [t.send_rate / ref for t, ref in zip(found, source, strict=True)]
        print(
            f"whole command / smtp-source, {backend:<10} {statistics.median(wholes):.2f}"
            f" (send phase {statistics.median(phases):.2f})   (target >= 1.0)"
        )


if __name__ == "__main__":
    main()
