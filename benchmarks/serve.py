"""`newsletter serve` over real HTTP: one-click unsubscribes, archive pages and tracked links'
redirects (run: `make bench`).

A real `newsletter serve` process on 127.0.0.1 serves a throwaway copy of the project. One
keep-alive client times each request kind interleaved in the same run; GET /healthz (the same
stack: uvicorn, Guard, routing, an empty answer) is the reference the others are a ratio of.
A one-click POST is a distinct token each time, so every one verifies an HMAC and commits a
suppression to SQLite. Then N clients at once POST distinct tokens, for throughput.

The redirect (GET /r/TOKEN, `[tracking] clicks = "per-reader"`), on SQLite and on PostgreSQL
(the tests' throwaway cluster: fsync off), after a send of issue 14 to ROWS readers recorded in
the outbox: one keep-alive client alternates it with GET /healthz (median and p99); then 64
clients at once ask for distinct tokens (a random reader and link each), and the same clients
for /healthz. Every request is a click event: the run checks that the outbox kept them all.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from newsletter.issues import load_issue
from newsletter.mail.clicktokens import LinkTokens
from newsletter.mail.tokens import sign
from newsletter.mail.tracking import render_for_sending
from newsletter.models import DeliveryStatus
from newsletter.outbox import open_outbox
from newsletter.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.postgres import start_cluster  # noqa: E402
from support.project import copy_project  # noqa: E402

SECRET = "benchmark-secret-0123456789abcdef"
RUNS = 300
BURST = 1000
CLIENTS = 16
REDIRECT_RUNS = 1000
REDIRECT_BURST = 5000
REDIRECT_CLIENTS = 64
ROWS = 2000


def start_server(
    project: Path, log: Path, extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "NEWSLETTER_SECRET": SECRET, "PYTHONUNBUFFERED": "1", **(extra or {})}
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "newsletter", "serve", "--port", "0"],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=handle,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        match = re.search(r"at (http://127\.0\.0\.1:\d+)/", log.read_text(errors="replace"))
        if match:
            base = match.group(1)
            try:
                httpx.get(f"{base}/healthz")
                return process, base
            except httpx.ConnectError:
                pass
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"serve did not start:\n{log.read_text(errors='replace')}")


def timed(call: Callable[[], httpx.Response], expect: int = 200) -> float:
    start = time.perf_counter()
    response = call()
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == expect, response.status_code
    return elapsed


async def burst(base: str, tokens: list[str]) -> float:
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    queue = list(tokens)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            while queue:
                token = queue.pop()
                response = await client.post(
                    f"{base}/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"}
                )
                assert response.status_code == 200

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        return time.perf_counter() - start


def row(label: str, values: list[float], reference: float) -> str:
    median = statistics.median(values)
    p90 = statistics.quantiles(values, n=10)[-1]
    return f"| {label} | {median:.2f} | {p90:.2f} | {median / reference:.1f}× |"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        copy_project(project)
        process, base = start_server(project, Path(tmp) / "serve.log")
        try:
            one_click = {"List-Unsubscribe": "One-Click"}
            tokens = [sign(SECRET, "main", f"reader{i:05d}@example.com") for i in range(RUNS)]
            kinds: dict[str, list[float]] = {
                k: [] for k in ("ref", "post", "get", "issue", "index")
            }
            with httpx.Client(base_url=base) as client:
                for _ in range(20):  # warm up: imports, the first render, SQLite's first open
                    client.get("/healthz"), client.get("/issues/14"), client.get("/")
                for token in tokens:
                    path = f"/unsubscribe/{token}"
                    kinds["ref"].append(timed(lambda: client.get("/healthz")))
                    kinds["get"].append(timed(lambda p=path: client.get(p)))
                    kinds["post"].append(timed(lambda p=path: client.post(p, data=one_click)))
                    kinds["issue"].append(timed(lambda: client.get("/issues/14")))
                    kinds["index"].append(timed(lambda: client.get("/")))
            more = [sign(SECRET, "main", f"burst{i:05d}@example.com") for i in range(BURST)]
            seconds = asyncio.run(burst(base, more))
        finally:
            process.terminate()
            process.wait(10)
        with open_outbox(project / ".newsletter" / "outbox.sqlite3") as outbox:
            stored = len(outbox.suppressions("main"))
        assert stored == RUNS + BURST, stored
        log = (Path(tmp) / "serve.log").read_text(errors="replace")
        assert tokens[0] not in log
    reference = statistics.median(kinds["ref"])
    print(f"newsletter serve on 127.0.0.1, {RUNS} requests of each kind, interleaved (ms)\n")
    print("| request | median | p90 | × GET /healthz |")
    print("| --- | --- | --- | --- |")
    print(row("reference: GET /healthz", kinds["ref"], reference))
    print(row("GET /unsubscribe/TOKEN (confirm page)", kinds["get"], reference))
    print(row("POST /unsubscribe/TOKEN (one-click, new suppression)", kinds["post"], reference))
    print(row("GET /issues/14 (archive page, cached render)", kinds["issue"], reference))
    print(row("GET / (archive index)", kinds["index"], reference))
    print(
        f"\n{BURST} one-click POSTs from {CLIENTS} concurrent clients: {seconds:.2f} s, "
        f"{BURST / seconds:.0f} unsubscribes/s; {stored} suppressions stored"
    )


def tracked_send(project: Path, env: dict[str, str]) -> list[str]:
    """Issue 14 'sent' to ROWS readers with per-reader tracking: its links recorded, the rows
    sent; the click URL paths of every reader's every link (the canary's included)."""
    settings = load_settings(project / "newsletter.toml", environ=env)
    issue = load_issue(settings.issues_dir, 14)
    links = render_for_sending(issue, settings, "main").links
    with open_outbox(settings.outbox_target) as outbox:
        outbox.sent_links.record(14, "main", "per-reader", links)
        outbox.plan(14, "main", [f"reader{n:05d}@example.com" for n in range(ROWS)])
        rows = [row.id for row in outbox.rows(14, "main")]
        for row in rows:
            outbox.record(row, DeliveryStatus.SENT)
    tokens = LinkTokens(SECRET, 14, links)
    return [f"/r/{token}" for row in rows for token in tokens.for_row(row)]


async def many(base: str, paths: list[str], expect: int) -> float:
    """`paths` asked by REDIRECT_CLIENTS keep-alive connections at once; the seconds it took.
    A bare HTTP/1.1 client on asyncio streams: httpx's own pool costs more per request than the
    server does, and would measure itself."""
    host, port = base.removeprefix("http://").split(":")
    queue = list(paths)
    status = f"HTTP/1.1 {expect} ".encode()

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while queue:
                path = queue.pop()
                writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(status), head[:40]
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(REDIRECT_CLIENTS)))
    return time.perf_counter() - start


def redirects(label: str, outbox_url: str | None) -> str:
    """One backend's redirect figures, as a table row."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        copy_project(project)
        env = {"NEWSLETTER_TRACKING__CLICKS": "per-reader"}
        if outbox_url:
            env["NEWSLETTER_OUTBOX__URL"] = outbox_url
        paths = tracked_send(project, env)
        rng = random.Random(23)
        rng.shuffle(paths)
        process, base = start_server(project, Path(tmp) / "serve.log", env)
        try:
            reference: list[float] = []
            redirect: list[float] = []
            with httpx.Client(base_url=base) as client:
                for path in paths[:50]:  # warm up: the outbox connection, the links cache
                    client.get(path), client.get("/healthz")
                for path in paths[50 : 50 + REDIRECT_RUNS]:
                    reference.append(timed(lambda: client.get("/healthz")))
                    redirect.append(timed(lambda p=path: client.get(p), expect=302))
            burst_paths = paths[50 + REDIRECT_RUNS : 50 + REDIRECT_RUNS + REDIRECT_BURST]
            burst = asyncio.run(many(base, burst_paths, 302))
            health = asyncio.run(many(base, ["/healthz"] * len(burst_paths), 200))
            asked = 50 + REDIRECT_RUNS + len(burst_paths)
        finally:
            process.terminate()
            process.wait(15)
        settings = load_settings(project / "newsletter.toml", environ=env)
        with open_outbox(settings.outbox_target) as outbox:
            kept = outbox.clicks.count(14, "main")
    assert kept == asked, (kept, asked)
    ref_median, ref_p99 = statistics.median(reference), percentile(reference, 99)
    median, p99 = statistics.median(redirect), percentile(redirect, 99)
    per_second, health_per_second = len(burst_paths) / burst, len(burst_paths) / health
    return (
        f"| {label} | {ref_median:.2f} / {ref_p99:.2f} | {median:.2f} / {p99:.2f} | "
        f"{median / ref_median:.1f}× | {per_second:,.0f} ({per_second / health_per_second:.2f}× "
        f"of {health_per_second:,.0f} /healthz) | {kept:,} of {asked:,} |"
    )


def percentile(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100)[pct - 1]


def main_redirects() -> None:
    rows = [redirects("SQLite", None)]
    cluster = start_cluster()
    try:
        rows.append(redirects("PostgreSQL", cluster.create_database()))
    finally:
        cluster.stop()
    print(
        f"\nGET /r/TOKEN, per-reader tracking, a send of issue 14 to {ROWS:,} readers: one "
        f"keep-alive client, {REDIRECT_RUNS} of each interleaved (ms); then "
        f"{REDIRECT_BURST:,} distinct tokens from {REDIRECT_CLIENTS} clients at once\n"
    )
    print(
        "| outbox | GET /healthz median / p99 | GET /r/TOKEN median / p99 | median × /healthz "
        "| redirects/s, 64 clients | click events kept |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
    main_redirects()
