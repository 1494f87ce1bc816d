"""`newsletter check --archive` over 100 published issues (issue 33's figure: a warm cache).

A copy of the project holds 100 issues of 20 links each (2,000 distinct URLs, on five hosts that
a DNS server on 127.0.0.1 resolves to a local HTTP server, as benchmarks/preflight.py does), all
published (`[serve] publish = "all"`). check_archive runs cold once (the archive cache deleted),
then warm: every answer from .newsletter/archive-cache.json. The reference, in the same run, is
loading the 100 issue files alone, which every run does. Target: warm well under a second.
Run: `.venv/bin/python benchmarks/archive.py`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the test servers in tests/support/

from newsletter.config.settings import load_settings  # noqa: E402
from newsletter.draft import published_issues  # noqa: E402
from newsletter.issues import issue_path, read_issue_file  # noqa: E402
from newsletter.preflight.archive import ARCHIVE_CACHE, check_archive  # noqa: E402
from support.dnszone import dns_server  # noqa: E402
from support.onlineproject import configure, write_issue  # noqa: E402
from support.project import copy_project, publish_all  # noqa: E402
from support.websites import website  # noqa: E402

ISSUES = 100
LINKS = 20  # per issue, in 5 items of 4
HOSTS = [f"site{n}.example" for n in range(5)]
WARM_RUNS = 10


def main() -> None:
    zone = {(host, "A"): ["127.0.0.1"] for host in HOSTS}
    with tempfile.TemporaryDirectory() as tmp, dns_server(zone) as (dns_port, _), website() as site:
        root = copy_project(Path(tmp) / "project")
        for path in (root / "issues").iterdir():
            if path.suffix in (".yaml", ".yml", ".md"):
                path.unlink()
        configure(root, nameserver=f"127.0.0.1:{dns_port}", base_url=site.base)
        publish_all(root)
        port = site.base.rsplit(":", 1)[1]
        for number in range(1, ISSUES + 1):
            urls = [
                f"http://{HOSTS[n % len(HOSTS)]}:{port}/ok?issue={number}&link={n}"
                for n in range(LINKS)
            ]
            write_issue(root, number, {f"item {i}": urls[i * 4 : i * 4 + 4] for i in range(5)})
        settings = load_settings(root / "newsletter.toml", environ={})
        (settings.state_dir / ARCHIVE_CACHE).unlink(missing_ok=True)

        def load_all() -> None:
            for number in published_issues(settings):
                read_issue_file(issue_path(settings.issues_dir, number))

        reference = timed(load_all, WARM_RUNS)
        started = time.perf_counter()
        cold = check_archive(settings)
        cold_s = time.perf_counter() - started
        warms = timed(lambda: check_archive(settings), WARM_RUNS)
        warm = check_archive(settings)
    ref, warm_s = statistics.median(reference), statistics.median(warms)
    print(f"{ISSUES} issues, {cold.urls} links on {len(HOSTS)} hosts; dead: {cold.dead}")
    print(f"  cold (every link fetched: {cold.fetched}):        {cold_s * 1000:8.0f} ms")
    print(
        f"  warm (fetched: {warm.fetched}, median of {WARM_RUNS}):          {warm_s * 1000:8.0f} ms"
    )
    print(f"  reference: the {ISSUES} issue files loaded:     {ref * 1000:8.0f} ms")
    print(f"  warm / reference: {warm_s / ref:.2f}x")


def timed(run: Callable[[], object], times: int) -> list[float]:
    values = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        values.append(time.perf_counter() - started)
    return values


if __name__ == "__main__":
    main()
