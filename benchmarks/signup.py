"""The signup pieces' costs, each beside a reference measured in the same run:

- the proof of work on the server, at `[signup] work_cost`: a challenge made, a payload verified
  (accepted, forged, replayed), against one bare PBKDF2 derivation (hashlib, OpenSSL): the floor
  any verifier of this protocol pays;
- the browser's cost of a challenge: our script in headless Chromium against the `altcha`
  package's own Python solver, on the same challenges (skipped without Chromium);
- an import: a Mailchimp-layout export read by the importer against the same rows read by the
  list reader (read_rows), both in rows per second.

Run: `.venv/bin/python benchmarks/signup.py [--cost N] [--challenges N] [--rows N]`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from altcha import Challenge, solve_challenge

from newsletter.config.settings import SignupSettings
from newsletter.importers import read_export
from newsletter.importers.subscribers import ListReport, read_rows
from newsletter.signup.challenge import ProofOfWork

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"benchmark-secret-0123456789abcdef"
CHROMIUM = os.environ.get("NEWSLETTER_CHROMIUM", "/usr/bin/chromium")


def median_us(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def server_side(cost: int, repeats: int) -> None:
    pow_ = ProofOfWork(SECRET, cost=cost, expiry=600)
    solved = []
    for _ in range(repeats):
        made = pow_.challenge()
        solution = solve_challenge(Challenge.from_dict(made))
        assert solution is not None
        payload = {"challenge": made, "solution": solution.to_dict()}
        solved.append(base64.b64encode(json.dumps(payload).encode()).decode())
    forged = ProofOfWork(b"another-secret-0123456789abcdefgh", cost=cost, expiry=600)
    payloads = iter(solved)
    accepted = median_us(lambda: pow_.verify(next(payloads)), repeats)
    replayed = median_us(lambda: pow_.verify(solved[0]), repeats)
    forgery = median_us(lambda: forged.verify(solved[0]), repeats)
    making = median_us(pow_.challenge, repeats)
    salt, password = os.urandom(16), os.urandom(20)
    floor = median_us(lambda: hashlib.pbkdf2_hmac("sha256", password, salt, cost, 32), repeats)
    print(f"proof of work on the server, cost {cost} (median of {repeats})")
    print("| step | µs | against one bare PBKDF2 |")
    print("| --- | --- | --- |")
    print(f"| one PBKDF2 derivation (hashlib) | {floor:.0f} | 1.00 |")
    for name, value in (
        ("verify, accepted", accepted),
        ("verify, replayed", replayed),
        ("verify, forged", forgery),
        ("make a challenge", making),
    ):
        print(f"| {name} | {value:.0f} | {value / floor:.2f} |")
    print(f"accepted signups a second, one core, verification alone: {1e6 / accepted:,.0f}\n")


def browser_cost(cost: int, count: int) -> tuple[list[float], list[float]] | None:
    """ms per challenge at `cost`: our script in headless Chromium, and the altcha package's
    Python solver on the same challenges; None without Chromium."""
    if not Path(CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import CHROMIUM_ARGS
    from support.worksite import site

    pow_ = ProofOfWork(SECRET, cost=cost, expiry=600)
    challenges = [pow_.challenge() for _ in range(count)]
    ours, reference = [], []
    with site(pow_) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        page.evaluate("(c) => window.NewsletterWork.solve(c)", challenges[0])  # warm up
        for made in challenges:
            started = time.perf_counter()
            page.evaluate("(c) => window.NewsletterWork.solve(c)", made)
            ours.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            solve_challenge(Challenge.from_dict(made))
            reference.append((time.perf_counter() - started) * 1000)
        browser.close()
    return ours, reference


def browser_side(cost: int, count: int) -> None:
    measured = browser_cost(cost, count)
    if measured is None:
        print(f"browser: skipped (no Chromium at {CHROMIUM})\n")
        return
    ours, reference = measured
    print(f"the browser's cost of a challenge, cost {cost}, {count} challenges (ms)")
    print("| solver | median | p90 | max |")
    print("| --- | --- | --- | --- |")
    for name, times in (("ours, headless Chromium", ours), ("altcha (Python)", reference)):
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"| {name} | {statistics.median(times):.0f} | {p90:.0f} | {max(times):.0f} |")
    ratio = statistics.median(ours) / statistics.median(reference)
    print(f"ratio of medians (ours / altcha's): {ratio:.2f}\n")


def imports(rows: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "subscribed_members_export.csv"
        listed = Path(folder) / "list.csv"
        with export.open("w", encoding="utf-8") as out, listed.open("w", encoding="utf-8") as flat:
            out.write(
                '"Email Address","First Name","Last Name",MEMBER_RATING,OPTIN_TIME,OPTIN_IP,'
                "CONFIRM_TIME,CONFIRM_IP,LATITUDE,LONGITUDE,GMTOFF,DSTOFF,TIMEZONE,CC,REGION,"
                "LAST_CHANGED,LEID,EUID,NOTES,TAGS\n"
            )
            flat.write("email,name\n")
            for n in range(rows):
                out.write(
                    f'reader{n}@example.org,Reader,{n},2,"2020-01-02 03:04:05",'
                    f'198.51.100.{n % 250},"2020-01-02 03:05:05",198.51.100.{n % 250},,,,,,,,'
                    f'"2021-01-01 00:00:00",{n},e{n:x},,\n'
                )
                flat.write(f"reader{n}@example.org,Reader {n}\n")
        started = time.perf_counter()
        count = sum(1 for _ in read_export(export))
        ours = time.perf_counter() - started
        started = time.perf_counter()
        listed_count = sum(1 for _ in read_rows(listed, ListReport(listed)))
        reference = time.perf_counter() - started
    assert count == listed_count == rows
    print(f"an import of {rows:,} Mailchimp rows (consent columns parsed) against the list reader")
    print("| reader | rows/s |")
    print("| --- | --- |")
    print(f"| importer (Mailchimp layout) | {rows / ours:,.0f} |")
    print(f"| list reader (email, name) | {rows / reference:,.0f} |")
    print(f"ratio (importer / list reader): {reference / ours:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", type=int, default=SignupSettings().work_cost)
    parser.add_argument("--challenges", type=int, default=30)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    server_side(args.cost, 200)
    browser_side(args.cost, args.challenges)
    imports(args.rows)


if __name__ == "__main__":
    main()
