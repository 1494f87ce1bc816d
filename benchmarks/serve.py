"""`newsletter serve` over real HTTP: one-click unsubscribes and archive pages, tracked links'
redirects, then signups (run: `make bench`; `--only unsubscribe|redirect|signup` for one part).

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
from functools import partial
from pathlib import Path

import httpx
from altcha import Challenge, solve_challenge

from newsletter.config.settings import load_settings
from newsletter.database import open_database
from newsletter.issues import load_issue
from newsletter.mail.clicktokens import LinkTokens
from newsletter.mail.tokens import sign
from newsletter.mail.tracking import render_for_sending
from newsletter.models import DeliveryStatus

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy, the planning helpers
from support.database import plan, record  # noqa: E402
from support.postgres import start_cluster  # noqa: E402
from support.project import copy_project, publish_all  # noqa: E402

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


def unsubscribes() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        copy_project(project)
        publish_all(project)  # /issues/14 is a page, not the 404 of an unsent issue
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
                    kinds["get"].append(timed(partial(client.get, path)))
                    kinds["post"].append(timed(partial(client.post, path, data=one_click)))
                    kinds["issue"].append(timed(lambda: client.get("/issues/14")))
                    kinds["index"].append(timed(lambda: client.get("/")))
            more = [sign(SECRET, "main", f"burst{i:05d}@example.com") for i in range(BURST)]
            seconds = asyncio.run(burst(base, more))
        finally:
            process.terminate()
            process.wait(10)
        with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
            stored = len(database.suppressions.all("main"))
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
    with open_database(settings.database_target) as database:
        database.sent_links.record(14, "main", "per-reader", links)
        plan(database, 14, "main", [f"reader{n:05d}@example.com" for n in range(ROWS)])
        rows = [row.id for row in database.deliveries.rows(14, "main")]
        for row in rows:
            record(database, row, DeliveryStatus.SENT)
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
                    redirect.append(timed(partial(client.get, path), expect=302))
            burst_paths = paths[50 + REDIRECT_RUNS : 50 + REDIRECT_RUNS + REDIRECT_BURST]
            burst = asyncio.run(many(base, burst_paths, 302))
            health = asyncio.run(many(base, ["/healthz"] * len(burst_paths), 200))
            asked = 50 + REDIRECT_RUNS + len(burst_paths)
        finally:
            process.terminate()
            process.wait(15)
        settings = load_settings(project / "newsletter.toml", environ=env)
        with open_database(settings.database_target) as database:
            kept = database.clicks.count(14, "main")
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
    from newsletter.config.settings import SignupSettings

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
    from signup import browser_cost

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
    parser.add_argument("--only", choices=("unsubscribe", "redirect", "signup"), default=None)
    chosen = parser.parse_args().only
    if chosen in (None, "unsubscribe"):
        unsubscribes()
    if chosen in (None, "redirect"):
        main_redirects()
    if chosen in (None, "signup"):
        signups()


if __name__ == "__main__":
    main()
