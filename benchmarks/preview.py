"""Save -> reload latency of `newsletter preview` on issue 14 and on the two weeklies of
tests/data/weeklies (the 150-item English one is the largest), next to the bare render it contains.

A real preview server runs on 127.0.0.1 over a temporary copy of the project. Each run rewrites
the issue's title on disk and times, from just before the write:
  - the Server-Sent Event reaching a client (file watcher + push),
  - that client holding the re-rendered page and email over HTTP (what the page's script fetches),
  - headless Chromium's email frame finishing its load of the new version (when Chromium is here).
The reference, measured in the same run, is the bare pipeline the server runs per save: load the
issue, render, build the sample message, run the checks. Budget: 300 ms from save to reload.
Run: `.venv/bin/python benchmarks/preview.py [RUNS] [ISSUE ...]` (default: 20 runs of 14 580 21).
"""

from __future__ import annotations

import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from newsletter.config.settings import load_settings
from newsletter.web.listen import LOOPBACK_NAMES, bind_socket, url_of
from newsletter.web.preview.app import create_server
from newsletter.web.preview.workspace import Workspace, build_view

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.project import copy_project  # noqa: E402
from support.weeklies import add_weekly, weekly_environ  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
BUDGET_MS = 300.0
SETTLE_S = 0.25
TITLE = "title: AI系统内容推荐第14期"


@contextmanager
def project_copy(number: int) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_project(Path(tmp))
        if number != 14:
            add_weekly(root, number)
        yield root


def environ(number: int) -> dict[str, str]:
    return {} if number == 14 else weekly_environ(number)


@contextmanager
def running_server(root: Path, number: int) -> Iterator[str]:
    config = root / "newsletter.toml"
    workspace = Workspace(config, load_settings(config, environ=environ(number)))
    sock = bind_socket("127.0.0.1", 0)
    server = create_server(workspace, trusted_hosts=LOOPBACK_NAMES)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield url_of(sock).rstrip("/")
    finally:
        server.stop()
        thread.join(10)


class Editor:
    """Saves the issue with a new title each time, as an editor's Ctrl-S does."""

    def __init__(self, root: Path, number: int) -> None:
        self.number = number
        self.path = next(p for p in (root / "issues").glob(f"{number}.*"))
        self.original = self.path.read_text(encoding="utf-8")
        self.title = next(line for line in self.original.splitlines() if line.startswith("title:"))
        self.count = 0

    def save(self) -> tuple[str, float]:
        """Write a new title, and in a Markdown issue a word of its last section too (a save
        that changes one section, which is the most a save usually does); return the title
        and the wall-clock time just before the write."""
        self.count += 1
        title = f"第{self.number}期 修订{self.count}"
        text = self.original.replace(self.title, f"title: {title}", 1)
        if self.path.suffix == ".md":
            text = f"{text.rstrip()} ({self.count})\n"
        started = time.time()
        self.path.write_text(text, encoding="utf-8")
        return title, started


def bare_pipeline(root: Path, number: int, runs: int) -> list[float]:
    settings = load_settings(root / "newsletter.toml", environ=environ(number))
    build_view(settings, number)  # warm up: imports, template compilation
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        build_view(settings, number)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def over_http(url: str, editor: Editor, runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds from save to the SSE event, and to the new page + email fetched."""
    events: queue.Queue[float] = queue.Queue()
    ready = threading.Event()

    def listen() -> None:
        # No read timeout: the stream is quiet between saves by design.
        timeout = httpx.Timeout(10, read=None)
        with httpx.stream("GET", url + "/events", timeout=timeout) as stream:
            for line in stream.iter_lines():
                if line == "event: version":
                    events.put(time.time())
                    ready.set()

    threading.Thread(target=listen, daemon=True).start()
    ready.wait(5)
    events.get(timeout=5)  # the version at connect time
    to_event, to_content = [], []
    with httpx.Client(timeout=10) as client:
        for _ in range(runs):
            title, started = editor.save()
            arrived = events.get(timeout=5)
            page = client.get(f"{url}/issues/{editor.number}").text
            frame = client.get(f"{url}/issues/{editor.number}/email.html").text
            done = time.time()
            assert title in page, "the server served a stale page"
            assert title in frame, "the server served a stale email"
            to_event.append((arrived - started) * 1000)
            to_content.append((done - started) * 1000)
            time.sleep(SETTLE_S)
    return to_event, to_content


def in_chromium(url: str, editor: Editor, runs: int) -> list[float] | str:
    """Milliseconds from save to the email frame's load event in headless Chromium."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "playwright not installed"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    samples = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        # Images are answered here: nothing leaves the machine.
        page.route("http*://**/*", _answer_locally)
        page.goto(f"{url}/issues/{editor.number}")
        page.wait_for_function("() => document.body.dataset.frameVersion")
        # The frame element stays; each new version is loaded into it. Record each load.
        page.evaluate(
            "window.loads = []; document.getElementById('email-frame')"
            ".addEventListener('load', () => window.loads.push(Date.now()))"
        )
        for run in range(runs):
            title, started = editor.save()
            page.wait_for_function(f"() => window.loads.length > {run}", timeout=5000)
            loaded = page.evaluate(f"window.loads[{run}]")
            heading = page.evaluate(
                "document.getElementById('email-frame').contentDocument.querySelector('h1')"
                ".textContent"
            )
            assert title in heading, f"the frame shows {heading!r}, not {title!r}"
            samples.append(loaded - started * 1000)
            time.sleep(SETTLE_S)
        browser.close()
    return samples


def row(label: str, samples: list[float], reference: float) -> str:
    median = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else median
    return f"{label:<44} {median:>9.1f} {p90:>8.1f} {median / reference:>7.1f}x"


def _answer_locally(route: object) -> None:
    request = route.request  # type: ignore[attr-defined]
    if request.url.startswith("http://127.0.0.1"):
        route.continue_()  # type: ignore[attr-defined]
    else:
        route.abort()  # type: ignore[attr-defined]


def measure(number: int, runs: int) -> None:
    with project_copy(number) as root:
        reference = bare_pipeline(root, number, runs)
        editor = Editor(root, number)
        with running_server(root, number) as url:
            to_event, to_content = over_http(url, editor, runs)
            browser: list[float] | str = in_chromium(url, editor, runs)
    ref = statistics.median(reference)
    python = sys.version.split()[0]
    print(f"newsletter preview, issue {number}: save -> reload, {runs} saves (Python {python})")
    print(f"{'stage (ms from the save)':<44} {'median':>9} {'p90':>8} {'x ref':>8}")
    print(row("reference: load + render + sample + checks", reference, ref))
    print(row("SSE event at the client", to_event, ref))
    print(row("new page + email fetched over HTTP", to_content, ref))
    if isinstance(browser, str):
        print(f"{'email frame reloaded in Chromium':<44} skipped: {browser}")
        worst = statistics.median(to_content)
    else:
        print(row("email frame reloaded in Chromium", browser, ref))
        worst = statistics.median(browser)
    verdict = "within" if worst < BUDGET_MS else "OVER"
    print(f"budget {BUDGET_MS:.0f} ms: median save -> reload {worst:.1f} ms, {verdict} budget\n")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for number in [int(n) for n in sys.argv[2:]] or [14, 580, 21]:
        measure(number, runs)


if __name__ == "__main__":
    main()
