"""`newsletter serve` over real HTTP: one-click unsubscribes and archive pages, then signups
(run: `make bench`; `--only signup` for the second part).

A real `newsletter serve` process on 127.0.0.1 serves a throwaway copy of the project. One
keep-alive client times each request kind interleaved in the same run; GET /healthz (the same
stack: uvicorn, Guard, routing, an empty answer) is the reference the others are a ratio of.
A one-click POST is a distinct token each time, so every one verifies an HMAC and commits a
suppression to SQLite. Then N clients at once POST distinct tokens, for throughput.

Signups, on a project whose main list takes them (the domain check's DNS off: no network here):

1. signups per second one `serve` accepts, the proof of work verified at `[signup] work_cost`
   (challenges fetched and solved beforehand, in Python, by the altcha package), from 16
   clients at once, next to GET /healthz from 16 clients in the same run;
2. the cost of a challenge to a browser at that work_cost (our script in headless Chromium);
3. confirmation latency: from the POST to the mail's file in the capture server
   (`newsletter mailbox`), through a real `newsletter worker` at its default poll, with nothing
   else running and while `newsletter send` delivers issue 14 to 10,000 recipients (smtp-sink);
4. 1,000 signups from 16 clients for 100 addresses (variants of each: +tags, case), then the
   worker: how many mails went out (one per mailbox at most: <= 100). This part runs at
   work_cost 500, to solve its 1,000 challenges in seconds: the rule does not depend on it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import email
import email.policy
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
from altcha import Challenge, solve_challenge

from newsletter.mail.tokens import sign
from newsletter.outbox import open_outbox

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.project import copy_project  # noqa: E402

SECRET = "benchmark-secret-0123456789abcdef"
RUNS = 300
BURST = 1000
CLIENTS = 16


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


def unsubscribes() -> None:
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


# -- signups ------------------------------------------------------------------------------------

SIGNUP_RUNS = 300
LATENCY_RUNS = 20
BOMB_POSTS, BOMB_ADDRESSES, BOMB_COST = 1000, 100, 500
BULK = 200_000


def signup_env(cost: int) -> dict[str, str]:
    return {
        "NEWSLETTER_LISTS__MAIN__SIGNUP": "true",
        "NEWSLETTER_SIGNUP__WORK_COST": str(cost),
        "NEWSLETTER_SIGNUP__CHECK_DNS": "false",
        # Each client posts from an address of its own (X-Forwarded-For through the proxy on
        # this host); the limits are raised so the figure is the server's, not the limiter's.
        "NEWSLETTER_SIGNUP__PER_CLIENT_BURST": "100000",
        "NEWSLETTER_SIGNUP__SITE_BURST": "100000",
        "NEWSLETTER_SIGNUP__SITE_PER_MINUTE": "1000000",
    }


def _solve(made: dict[str, object]) -> str:
    solution = solve_challenge(Challenge.from_dict(made))
    assert solution is not None
    payload = {"challenge": made, "solution": solution.to_dict()}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def solved(base: str, count: int) -> list[str]:
    """`count` challenges of the server at `base`, solved on every core."""
    with httpx.Client(base_url=base) as client:
        made = [client.get("/signup/challenge").json() for _ in range(count)]
    with ProcessPoolExecutor() as pool:
        return list(pool.map(_solve, made, chunksize=8))


async def post_all(base: str, posts: list[tuple[str, str]], path: str = "/signup") -> float:
    """(address, payload) pairs POSTed from CLIENTS clients at once, each from an address of
    its own; the seconds it took (every answer must be 200)."""
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    queue = list(enumerate(posts))
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:

        async def worker() -> None:
            while queue:
                n, (address, payload) = queue.pop()
                headers = {"x-forwarded-for": f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"}
                data = {"email": address, "list": "main", "altcha": payload}
                response = await client.post(path, data=data, headers=headers)
                assert response.status_code == 200, response.status_code

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        return time.perf_counter() - start


async def get_all(base: str, path: str, count: int) -> float:
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    left = [count]
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                assert (await client.get(path)).status_code == 200

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        return time.perf_counter() - start


def start_mailbox(project: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "newsletter", "mailbox", "--port", "0"],
            cwd=project,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        match = re.search(r"on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if match:
            return process, int(match.group(1))
        time.sleep(0.05)
    process.kill()
    raise SystemExit("the capture server did not start")


def start_worker(project: Path, base: str, port: int, cost: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **signup_env(cost),
        "NEWSLETTER_SECRET": SECRET,
        "NEWSLETTER_NEWSLETTER__BASE_URL": base,
        "NEWSLETTER_SMTP__PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "newsletter", "worker"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Captured:
    """The recipients of the mails in the capture server's Maildir, each file read once."""

    def __init__(self, project: Path) -> None:
        self.folder = project / ".newsletter" / "mailbox" / "new"
        self.seen: set[str] = set()
        self.recipients: list[str] = []

    def __call__(self) -> list[str]:
        if self.folder.is_dir():
            for name in os.listdir(self.folder):
                if name in self.seen:
                    continue
                self.seen.add(name)
                head = (self.folder / name).read_bytes().split(b"\r\n\r\n", 1)[0]
                parsed = email.message_from_bytes(head, policy=email.policy.default)
                self.recipients.append(str(parsed["To"]).strip("<>"))
        return self.recipients


def latencies(
    base: str, captured: Captured, label: str, during: subprocess.Popen[bytes] | None = None
) -> list[float]:
    """ms from the POST to the confirmation's file in the capture server, LATENCY_RUNS times
    (with `during`, only while that process runs). Each POST comes at a random moment of the
    worker's poll: right after the last mail arrived, the worker is about to look again."""
    payloads = solved(base, LATENCY_RUNS)
    times: list[float] = []
    rng = random.Random(len(label))
    with httpx.Client(base_url=base) as client:
        for n, payload in enumerate(payloads):
            time.sleep(0.6 + rng.random())
            if during is not None and during.poll() is not None:
                break
            address = f"{label}{n}@example.org"
            started = time.perf_counter()
            data = {"email": address, "list": "main", "altcha": payload}
            headers = {"x-forwarded-for": f"10.200.{len(label)}.{n}"}
            assert client.post("/signup", data=data, headers=headers).status_code == 200
            while address not in captured():
                if time.perf_counter() - started > 30:
                    raise SystemExit(f"no confirmation for {address} within 30 s")
                time.sleep(0.005)
            times.append((time.perf_counter() - started) * 1000)
    return times


def bulk_send(project: Path, port: int) -> subprocess.Popen[bytes]:
    with (project / "bulk.csv").open("w", encoding="utf-8") as handle:
        handle.write("email,name\n")
        handle.writelines(f"bulk{n:05d}@example.com,Reader {n}\n" for n in range(BULK))
    env = {
        **os.environ,
        "NEWSLETTER_SECRET": SECRET,
        "NEWSLETTER_SMTP__PORT": str(port),
        "NEWSLETTER_LISTS__MAIN__PATH": "bulk.csv",
        "NEWSLETTER_LISTS__MAIN__SIGNUP": "true",
    }
    args = [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--yes"]
    return subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.DEVNULL)


def start_sink() -> tuple[subprocess.Popen[bytes], int] | None:
    sink = shutil.which("smtp-sink", path=os.environ.get("PATH", "") + ":/usr/sbin")
    if sink is None:
        return None
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [sink, *(["-u", "nobody"] if os.geteuid() == 0 else []), f"127.0.0.1:{port}", "1024"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    return None


def stats(values: list[float]) -> str:
    p90 = statistics.quantiles(values, n=10)[-1]
    return f"median {statistics.median(values):.0f}, p90 {p90:.0f}"


def signups() -> None:
    from newsletter.settings import SignupSettings

    cost = SignupSettings().work_cost
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp) / "project")
        process, base = start_server(project, Path(tmp) / "serve.log", signup_env(cost))
        worker = mailbox = sink = bulk = None
        try:
            payloads = solved(base, SIGNUP_RUNS + 40)
            posts = [(f"reader{n}@example.org", p) for n, p in enumerate(payloads)]
            asyncio.run(post_all(base, posts[SIGNUP_RUNS:]))  # warm up
            asyncio.run(get_all(base, "/healthz", 200))
            seconds = asyncio.run(post_all(base, posts[:SIGNUP_RUNS]))
            reference = asyncio.run(get_all(base, "/healthz", SIGNUP_RUNS))
            mailbox, port = start_mailbox(project, Path(tmp) / "mailbox.log")
            worker = start_worker(project, base, port, cost)
            captured = Captured(project)
            while len(captured()) < SIGNUP_RUNS + 40:  # the burst's confirmations out
                time.sleep(0.1)
            idle = latencies(base, captured, "idle")
            busy: list[float] = []
            still_sending = False
            started = start_sink()
            if started is not None:
                sink, sink_port = started
                bulk = bulk_send(project, sink_port)
                time.sleep(6.0)  # planning done, the send under way
                busy = latencies(base, captured, "busy", during=bulk)
                still_sending = bulk.poll() is None
        finally:
            for proc in (worker, bulk, process, mailbox, sink):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(20)
                    except subprocess.TimeoutExpired:
                        proc.kill()
        sent = captured()
    browser = None
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from signup import browser_cost  # type: ignore[import-not-found]

    browser = browser_cost(cost, 20)
    bombed = bombing()
    print(f"\nsignups on one `newsletter serve`, work_cost {cost}, {CLIENTS} clients\n")
    print("| figure | measured | reference (same run) | ratio |")
    print("| --- | --- | --- | --- |")
    rate, ref_rate = SIGNUP_RUNS / seconds, SIGNUP_RUNS / reference
    print(
        f"| signups accepted per second (proof of work verified, one transaction each)"
        f" | {rate:.0f}/s | GET /healthz: {ref_rate:.0f}/s | {rate / ref_rate:.2f}× |"
    )
    if browser is not None:
        ours, python = browser
        print(
            f"| a browser's cost of a challenge (our script, headless Chromium, 20)"
            f" | {stats(ours)} ms | altcha's Python solver: {stats(python)} ms"
            f" | {statistics.median(ours) / statistics.median(python):.2f}× |"
        )
    print(
        f"| confirmation latency, POST to the capture server (`[worker] poll` 0.5 s), idle"
        f" | {stats(idle)} ms | | |"
    )
    if busy:
        note = "" if still_sending else f" ({len(busy)} of {LATENCY_RUNS} before it ended)"
        print(
            f"| ... while `newsletter send` delivers {BULK:,} to smtp-sink{note}"
            f" | {stats(busy)} ms | idle: {statistics.median(idle):.0f} ms"
            f" | {statistics.median(busy) / statistics.median(idle):.2f}× |"
        )
    mails, mailboxes = bombed
    print(
        f"| {BOMB_POSTS:,} signups from {CLIENTS} clients for {BOMB_ADDRESSES} addresses"
        f" (work_cost {BOMB_COST}): mails sent | {mails} | mailboxes: {mailboxes} | |"
    )
    assert len(sent) == len(set(sent)), "a confirmation went twice"
    assert mails <= BOMB_ADDRESSES, mails


def bombing() -> tuple[int, int]:
    """BOMB_POSTS signups for BOMB_ADDRESSES mailboxes, then the worker: (mails, mailboxes)."""
    from newsletter.signup.pending import mailbox_key

    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp) / "project")
        process, base = start_server(project, Path(tmp) / "serve.log", signup_env(BOMB_COST))
        try:
            payloads = solved(base, BOMB_POSTS)
            forms = ("p{n}@example.org", "P{n}+x@example.org", "p{n}+{k}@EXAMPLE.org")
            posts = [
                (forms[k % 3].format(n=k % BOMB_ADDRESSES, k=k), payload)
                for k, payload in enumerate(payloads)
            ]
            asyncio.run(post_all(base, posts))
        finally:
            process.terminate()
            process.wait(10)
        mailbox, port = start_mailbox(project, Path(tmp) / "mailbox.log")
        try:
            env = {
                **os.environ,
                **signup_env(BOMB_COST),
                "NEWSLETTER_SECRET": SECRET,
                "NEWSLETTER_SMTP__PORT": str(port),
            }
            done = subprocess.run(
                [sys.executable, "-m", "newsletter", "worker", "--once"],
                cwd=project,
                env=env,
                capture_output=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            time.sleep(0.5)
            sent = Captured(project)()
        finally:
            mailbox.terminate()
            mailbox.wait(10)
    return len(sent), len({mailbox_key(a) for a in sent})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("unsubscribe", "signup"), default=None)
    chosen = parser.parse_args().only
    if chosen in (None, "unsubscribe"):
        unsubscribes()
    if chosen in (None, "signup"):
        signups()


if __name__ == "__main__":
    main()
