"""`newsletter check --online` for issue 14 (14 links + the sender's DNS) against local servers.

A DNS server (dnslib) on 127.0.0.1 answers for news.example.org (SPF with one include, the DKIM
key of a generated [dkim] key, DMARC, MX) and resolves the issue's link hosts (arxiv.org,
github.com, mp.weixin.qq.com, doi.org) to 127.0.0.1, where an HTTPS server with a throwaway CA's
certificate answers every path. The issue's URLs keep their hosts and paths and get that
server's port. Nothing leaves the machine: every name is resolved by the test DNS server (and
`[check] allow_private = true`, set by support.onlineproject, lets the check reach 127.0.0.1).

Printed: the offline checks (load + render + sample message + checks.py) as the reference, the
online checks with the cache cold (the cache file deleted before each run) and warm, and the
ratios. Targets: cold < 3 s, warm < 50 ms.
"""

from __future__ import annotations

import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import trustme
from cryptography.hazmat.primitives.asymmetric import rsa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the test servers in tests/support/

from newsletter.config.settings import load_settings  # noqa: E402
from newsletter.draft import review  # noqa: E402
from newsletter.issues import issue_path  # noqa: E402
from newsletter.preflight.run import OnlineReport, run_online  # noqa: E402
from newsletter.state.statecache import FILE_NAME  # noqa: E402
from support.dkimkeys import dkim_value  # noqa: E402
from support.dnszone import dns_server  # noqa: E402
from support.onlineproject import configure  # noqa: E402
from support.project import copy_project  # noqa: E402
from support.websites import website  # noqa: E402

LINK_HOSTS = ["arxiv.org", "github.com", "mp.weixin.qq.com", "doi.org", "zhuanlan.zhihu.com"]
COLD_RUNS = 5
WARM_RUNS = 30


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_project(Path(tmp) / "project")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca = trustme.CA()
        ca_file = root / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*LINK_HOSTS, "news.example.org").configure_cert(tls)
        zone = {
            ("news.example.org", "TXT"): ["v=spf1 mx include:_spf.example.org -all"],
            ("_spf.example.org", "TXT"): ["v=spf1 ip4:192.0.2.0/24 -all"],
            ("nl2026._domainkey.news.example.org", "TXT"): [dkim_value(key)],
            ("_dmarc.news.example.org", "TXT"): ["v=DMARC1; p=quarantine"],
            ("news.example.org", "MX"): ["10 mx.example.org"],
            ("news.example.org", "A"): ["127.0.0.1"],
            **{(host, "A"): ["127.0.0.1"] for host in LINK_HOSTS},
        }
        with dns_server(zone) as (dns_port, _), website(tls, other=200) as site:
            port = int(site.base.rsplit(":", 1)[1])
            configure(
                root,
                nameserver=f"127.0.0.1:{dns_port}",
                base_url=f"https://news.example.org:{port}",
                ca_file=ca_file,
                sender_domain="news.example.org",
                dkim_key=key,
                selector="nl2026",
            )
            issue_file = root / "issues" / "14.yaml"
            text = issue_file.read_text(encoding="utf-8")
            for host in LINK_HOSTS:
                text = text.replace(f"https://{host}/", f"https://{host}:{port}/")
            issue_file.write_text(text, encoding="utf-8")
            measure(root)


def measure(root: Path) -> None:
    settings = load_settings(root / "newsletter.toml", environ={})
    path = issue_path(settings.issues_dir, 14)
    draft = review(settings, path, "main")
    cache = settings.state_dir / FILE_NAME

    def offline() -> None:
        review(settings, path, "main")

    def online() -> OnlineReport:
        return asyncio.run(run_online(settings, draft.issue, draft.message, recipients=8))

    def cold() -> OnlineReport:
        cache.unlink(missing_ok=True)
        return online()

    reference = timed(offline, 20)
    first_started = time.perf_counter()
    first = cold()
    first_cold = time.perf_counter() - first_started
    colds = timed(cold, COLD_RUNS)
    warms = timed(online, WARM_RUNS)
    last = online()
    hosts = {urlsplit(url).hostname for url in first.links}
    print(
        f"issue 14: {len(first.links)} links on {len(hosts)} hosts, "
        f"{first.dns_queries} DNS queries and {first.fetched} HTTP requests when cold"
    )
    for finding in first.findings:
        print(f"  {finding}")
    print(f"  {first.summary()}")
    print(f"warm run: {last.dns_queries} DNS queries, {last.fetched} HTTP requests")
    ref = statistics.median(reference)
    rows = [
        ("reference: offline `check` (draft.review: load, render, sample, checks)", reference),
        ("online, cold cache (median of 5; target < 3 s)", colds),
        ("online, warm cache (median of 30; target < 50 ms)", warms),
    ]
    print(f"{'figure':<72} {'median':>10} {'max':>10} {'× ref':>7}")
    for label, values in rows:
        median = statistics.median(values)
        print(
            f"{label:<72} {median * 1000:>8.1f}ms {max(values) * 1000:>8.1f}ms"
            f" {median / ref:>6.2f}×"
        )
    print(
        "first cold run of the process (CA store, DKIM key, first connections): "
        f"{first_cold * 1000:.0f} ms"
    )
    cold_ok = max(colds) < 3 and first_cold < 3
    warm_ok = statistics.median(warms) < 0.05
    print(
        f"targets: cold < 3 s {'met' if cold_ok else 'NOT met'}; "
        f"warm < 50 ms {'met' if warm_ok else 'NOT met'}"
    )


def timed(run: Callable[[], object], times: int) -> list[float]:
    values = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        values.append(time.perf_counter() - started)
    return values


if __name__ == "__main__":
    main()
