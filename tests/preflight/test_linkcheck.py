"""The link check against real HTTP and HTTPS servers on 127.0.0.1 (see websites.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.config.settings import CheckSettings
from newsletter.models import Issue
from newsletter.preflight import report
from newsletter.preflight.linkcheck import LinkResult
from newsletter.preflight.lookup import Lookup
from newsletter.preflight.run import OnlineReport
from newsletter.state.statecache import Cache
from support.dnszone import dns_server
from support.linkchecks import check
from support.websites import SLOW, Site


def test_statuses_redirect_chains_and_head_fallback(http_site: Site) -> None:
    names = ["/ok", "/moved", "/found", "/missing", "/broken", "/forbidden", "/no-head", "/loop"]
    results, _ = check([http_site.url(name) for name in names])
    by_path = {url.removeprefix(http_site.base): result for url, result in results.items()}
    assert by_path["/ok"].status == 200
    assert by_path["/ok"].ok
    assert by_path["/ok"].redirects == []
    moved = by_path["/moved"]
    assert moved.ok
    assert moved.redirects == [(301, http_site.url("/moved-again")), (301, http_site.url("/ok"))]
    assert moved.target == http_site.url("/ok")
    assert by_path["/found"].redirects == [(302, http_site.url("/ok"))]
    assert (by_path["/missing"].status, by_path["/missing"].ok) == (404, False)
    assert (by_path["/broken"].status, by_path["/broken"].ok) == (500, False)
    assert by_path["/forbidden"].status == 403
    # HEAD refused with 405, GET answered: the link is fine.
    assert by_path["/no-head"].status == 200
    assert http_site.requests[("GET", "/no-head")] == 1
    assert http_site.requests[("GET", "/ok")] == 0  # HEAD was enough
    assert by_path["/loop"].error == f"a redirect loop (back to {http_site.url('/loop')})"


def test_redirect_chains_without_an_answer_end_without_a_status(http_site: Site) -> None:
    loop, hops = http_site.url("/loop"), http_site.url("/hop/0")
    results, _ = check([loop, hops])
    assert results[hops].error == "more than 10 redirects"
    assert len(results[hops].redirects) == 11
    lines = [str(f) for f in report.link_findings(results, {})]
    assert lines == [
        f"error: {loop}: a redirect loop (back to {loop}) (via 302, ending at {loop}) [link-check]",
        f"error: {hops}: more than 10 redirects (via {' → '.join(['302'] * 11)}, ending at "
        f"{http_site.url('/hop/11')}) [link-check]",
    ]
    assert "None" not in " ".join(lines)


def test_one_request_at_a_time_per_host(http_site: Site) -> None:
    http_site.most_busy = 0
    urls = [http_site.url(f"/ok?{n}") for n in range(8)]
    results, checker = check(urls, concurrency=8)
    assert all(result.ok for result in results.values())
    assert checker.fetched == 8
    assert http_site.most_busy == 1


def test_slow_link_times_out(http_site: Site) -> None:
    results, _ = check([http_site.url("/slow")], timeout=0.5)
    result = results[http_site.url("/slow")]
    assert result.error == "timeout after 0.5 s"
    assert SLOW > 0.5


def test_tls_verified_against_the_configured_ca(
    https_site: Site, untrusted_site: Site, ca_file: Path
) -> None:
    good, bad = https_site.url("/ok"), untrusted_site.url("/ok")
    results, _ = check([good, bad], ca_file=ca_file)
    assert results[good].status == 200
    assert results[bad].status is None
    assert results[bad].error.startswith("TLS: ")
    assert "certificate" in results[bad].error
    # Without the test CA the good server is not trusted either: verification is on by default.
    results, _ = check([good])
    assert results[good].error.startswith("TLS: ")


def test_cache_answers_a_second_run_and_failures_expire_sooner(
    http_site: Site, tmp_path: Path
) -> None:
    now = [1000.0]
    path = tmp_path / "cache.json"
    urls = [http_site.url("/ok?cache"), http_site.url("/missing?cache")]
    cache = Cache(path, clock=lambda: now[0])
    first, checker = check(urls, cache, cache_ttl=3600)
    cache.save()
    assert checker.fetched == 3  # HEAD /ok; HEAD and GET /missing
    now[0] += 30
    again, checker = check(urls, Cache(path, clock=lambda: now[0]), cache_ttl=3600)
    assert checker.fetched == 0
    assert all(result.cached for result in again.values())
    assert [r.status for r in again.values()] == [r.status for r in first.values()] == [200, 404]
    now[0] += 60  # the failure (kept a minute) is asked again, the good link is not
    _, checker = check(urls, Cache(path, clock=lambda: now[0]), cache_ttl=3600)
    assert checker.fetched == 2


def test_link_skip_fetches_nothing(http_site: Site) -> None:
    url = http_site.url("/ok?skipped")
    results, checker = check([url], link_skip=["127.0.0.1"])
    assert results[url].skipped
    assert checker.fetched == 0
    assert report.link_findings(results, {}) == []
    assert report.link_notes(results, {url: "「甲」 in 「项目」"}) == [
        f"「甲」 in 「项目」: {url}: not fetched ([check] link_skip)"
    ]
    summary = OnlineReport(links=results).summary()
    assert summary.startswith("online: 1 link(s): 0 answering, 0 failing, 1 not fetched")


def test_hosts_resolved_through_the_configured_nameservers(https_site: Site, ca_file: Path) -> None:
    port = https_site.base.rsplit(":", 1)[1]
    url = f"https://links.example:{port}/moved"
    zone = {("links.example", "A"): ["127.0.0.1"]}
    with dns_server(zone) as (dns_port, resolver):
        config = CheckSettings(nameservers=[f"127.0.0.1:{dns_port}"])
        lookup = Lookup(config, Cache(None))
        results, _ = check([url, "https://nowhere.example/"], lookup=lookup, ca_file=ca_file)
    assert results[url].status == 200
    assert results[url].target == f"https://links.example:{port}/ok"
    assert results["https://nowhere.example/"].error.endswith("does not resolve (no A/AAAA record)")
    assert ("links.example", "A") in resolver.queries


def test_findings_name_the_item(http_site: Site) -> None:
    issue = Issue.model_validate(
        {
            "number": 3,
            "title": "t",
            "sections": [
                {
                    "title": "项目",
                    "items": [
                        {"title": "好", "links": [{"label": "a", "url": http_site.url("/ok")}]},
                        {
                            "title": "坏",
                            "links": [{"label": "b", "url": http_site.url("/missing")}],
                        },
                        {"title": "搬", "links": [{"label": "c", "url": http_site.url("/moved")}]},
                        {"title": "慢", "links": [{"label": "d", "url": http_site.url("/found")}]},
                    ],
                }
            ],
        }
    )
    labels = report.item_labels(issue, "zh-CN")
    results, _ = check(list(labels))
    findings = report.link_findings(results, labels)
    assert [str(f) for f in findings] == [
        f"error: 「坏」 in 「项目」: {http_site.url('/missing')}: 404 [link-check]",
        f"warning: 「搬」 in 「项目」: {http_site.url('/moved')}: moved permanently to "
        f"{http_site.url('/ok')}; link the new address [link-moved]",
    ]
    # The permanent redirect is a warning above; only the temporary one is a note.
    assert report.link_notes(results, labels) == [
        f"「慢」 in 「项目」: {http_site.url('/found')} → {http_site.url('/ok')} (302 → 200)",
    ]


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (LinkResult("u", 500), "error: u: 500 [link-check]"),
        (
            LinkResult("u", None, error="timeout after 2 s"),
            "warning: u: timeout after 2 s [link-check]",
        ),
        (
            LinkResult("u", None, error="TLS: certificate has expired"),
            "error: u: TLS: certificate has expired [link-check]",
        ),
    ],
)
def test_levels(result: LinkResult, expected: str) -> None:
    assert [str(f) for f in report.link_findings({"u": result}, {})] == [expected]


def test_every_url_of_the_issue_is_labelled() -> None:
    issue = Issue.model_validate(
        {
            "number": 3,
            "title": "t",
            "intro": "见 [博客](https://blog.example/a) 与 [信](mailto:x@y.example)",
            "outro": "[再见](https://blog.example/a) [下期](https://next.example/)",
            "sections": [
                {
                    "title": "分析",
                    "items": [
                        {
                            "title": "甲",
                            "summary": "**粗** [论文](https://paper.example/1) `code`",
                            "links": [{"label": "a", "url": "https://a.example/"}],
                        },
                        {"title": "乙", "links": [{"label": "b", "url": "https://a.example/"}]},
                    ],
                }
            ],
        }
    )
    assert report.item_labels(issue, "zh-CN") == {
        "https://blog.example/a": "intro",
        "https://a.example/": "「甲」 in 「分析」",
        "https://paper.example/1": "「甲」 in 「分析」",
        "https://next.example/": "outro",
    }
