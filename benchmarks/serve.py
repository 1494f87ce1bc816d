"""`newsletter serve` over real HTTP: one-click unsubscribes and archive pages (run: `make bench`).

A real `newsletter serve` process on 127.0.0.1 serves a throwaway copy of the project. One
keep-alive client times each request kind interleaved in the same run; GET /healthz (the same
stack: uvicorn, Guard, routing, an empty answer) is the reference the others are a ratio of.
A one-click POST is a distinct token each time, so every one verifies an HMAC and commits a
suppression to SQLite. Then N clients at once POST distinct tokens, for throughput.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from newsletter.mail.tokens import sign
from newsletter.outbox import open_outbox

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.project import copy_project  # noqa: E402

SECRET = "benchmark-secret-0123456789abcdef"
RUNS = 300
BURST = 1000
CLIENTS = 16


def start_server(project: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "NEWSLETTER_SECRET": SECRET, "PYTHONUNBUFFERED": "1"}
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
            stored = len(outbox.suppressions.all("main"))
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


if __name__ == "__main__":
    main()
