"""A command's start: `newsletter --version`, `send --help` and the import of the root group,
next to the bare interpreter (`python -c pass`) in the same run.

Each figure is the median of `--repeat` fresh processes, the reference and ours run in turn so a
load that comes and goes falls on both; the ratio (ours / bare interpreter) is the figure to
compare across machines. Import times are `-X importtime`'s cumulative microseconds of the top
module, a process's wall time includes the interpreter's own start.

Run: `python benchmarks/startup.py [--repeat 15]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "newsletter --version": [sys.executable, "-m", "newsletter", "--version"],
    "newsletter --help": [sys.executable, "-m", "newsletter", "--help"],
    "newsletter send --help": [sys.executable, "-m", "newsletter", "send", "--help"],
}
IMPORTS = {
    "import newsletter.cli.main": "import newsletter.cli.main",
    "the send command's module": (
        "import click; from newsletter.cli.main import cli; "
        "cli.get_command(click.Context(cli), 'send')"
    ),
}


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def import_us(code: str) -> int:
    """-X importtime's cumulative time of the statement's imports, in microseconds."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], check=True, capture_output=True, text=True
    ).stderr
    total = 0
    for line in err.splitlines():
        parts = line.split("|")
        # A top-level import is the one without leading spaces in the name column.
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            total += int(parts[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in [*CASES, *IMPORTS]}
    for _ in range(args.repeat):
        for name, argv in CASES.items():
            times[name].append(wall(argv))
        for name, code in IMPORTS.items():
            times[name].append(import_us(code) / 1e6)
    reference = statistics.median(times["python -c pass (reference)"])
    print(f"| what | median of {args.repeat} | / python -c pass |")
    print("| --- | --- | --- |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.0f} ms | {median / reference:.2f} |")


if __name__ == "__main__":
    main()
