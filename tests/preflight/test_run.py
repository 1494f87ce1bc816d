"""run_online end to end: a project's settings, issue and sample message against the DNS server
and web servers the tests run on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.config.settings import load_settings
from newsletter.errors import SubscriberListError
from newsletter.issues import load_issue
from newsletter.mail.message import sample_message
from newsletter.preflight.run import OnlineReport, list_size, run_online
from newsletter.rendering.render import render_issue
from support.dnszone import ZoneResolver, closed_port
from support.onlineproject import configure, write_issue
from support.websites import Site


def online(root: Path, number: int, recipients: int) -> OnlineReport:
    settings = load_settings(root / "newsletter.toml", environ={})
    issue = load_issue(settings.issues_dir, number)
    sample, _ = sample_message(render_issue(issue, settings), settings, "main")
    return asyncio.run(run_online(settings, issue, sample.data, recipients))


@pytest.mark.slow
def test_good_domain_and_its_links(
    project: Path,
    dns: tuple[int, ZoneResolver],
    https_site: Site,
    ca_file: Path,
    dkim_key: rsa.RSAPrivateKey,
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=https_site.base,
        ca_file=ca_file,
        dkim_key=dkim_key,
        reply_to="editor@news.good.example",
    )
    write_issue(
        project,
        15,
        {
            "好": [https_site.url("/ok?run")],
            "坏": [https_site.url("/missing?run")],
            "搬": [https_site.url("/found?run")],
        },
    )
    first = online(project, 15, recipients=9)
    assert [str(f) for f in first.findings] == [
        f"error: 「坏」 in 「项目」: {https_site.url('/missing?run')}: 404 [link-check]"
    ]
    assert first.notes == [
        f"「搬」 in 「项目」: {https_site.url('/found?run')} → {https_site.url('/ok')} (302 → 200)"
    ]
    assert first.dns_queries > 0
    assert first.fetched == 6  # three HEADs, GET /missing, HEAD /ok after the 302, /unsubscribe
    # Warm: the same answers from .newsletter/, nothing asked of the network.
    second = online(project, 15, recipients=9)
    assert (second.dns_queries, second.fetched) == (0, 0)
    assert second.findings == first.findings
    assert (project / ".newsletter" / "preflight-cache.json").exists()


def test_missing_records_by_list_size(
    project: Path,
    dns: tuple[int, ZoneResolver],
    http_site: Site,
    dkim_key: rsa.RSAPrivateKey,
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=http_site.base,
        sender_domain="news.missing.example",
        dkim_key=dkim_key,
    )
    write_issue(project, 15, {"好": [http_site.url("/ok")]})
    small = online(project, 15, recipients=120)
    codes = [(f.level, f.code) for f in small.findings]
    assert codes == [
        ("error", "mx"),
        ("warning", "spf"),
        ("warning", "dmarc"),
        ("warning", "one-click"),
        ("warning", "dkim"),
    ]
    dkim = next(f for f in small.findings if f.code == "dkim")
    assert 'publish TXT nl._domainkey.news.missing.example "v=DKIM1; k=rsa; p=MII' in dkim.message
    big = online(project, 15, recipients=6000)
    assert [f.level for f in big.findings] == ["error"] * 5
    one_click = next(f for f in big.findings if f.code == "one-click")
    assert one_click.message.startswith(f"base_url {http_site.base} is not https")


@pytest.mark.slow
def test_offline_is_one_line(project: Path, http_site: Site) -> None:
    configure(project, nameserver=f"127.0.0.1:{closed_port()}", base_url=http_site.base)
    write_issue(project, 15, {"好": [http_site.url("/ok?offline")]})
    result = online(project, 15, recipients=9)  # a refused port answers at once
    assert result.findings == []
    assert result.links == {}
    assert result.summary().startswith("online checks skipped: no answer from 127.0.0.1:")
    assert http_site.requests[("HEAD", "/ok?offline")] == 0


def test_list_size_counts_rows(project: Path) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    assert list_size(settings, "main", None) == 8  # subscribers.example.csv: a header and 8 rows
    (project / "subscribers.example.csv").write_text("email\n\n" + "a@b.example\n" * 6001)
    assert list_size(settings, "main", None) == 6001
    (project / "subscribers.example.csv").unlink()
    with pytest.raises(SubscriberListError, match="no such subscriber list"):
        list_size(settings, "main", None)


@pytest.mark.slow
def test_a_verp_return_path_is_checked_on_its_own_domain(
    project: Path,
    dns: tuple[int, ZoneResolver],
    https_site: Site,
    ca_file: Path,
    dkim_key: rsa.RSAPrivateKey,
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=https_site.base,
        ca_file=ca_file,
        dkim_key=dkim_key,
    )
    config = project / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text + '\n[bounces]\nreturn_path = "b@news.missing.example"\n')
    write_issue(project, 15, {"好": [https_site.url("/ok?verp")]})
    found = online(project, 15, recipients=9).findings
    codes = {(f.level, f.code) for f in found}
    # The From domain is fine; the envelope domain bounces come back to has no SPF and no MX.
    assert ("warning", "spf") in codes
    mx = [f for f in found if f.code == "mx"]
    assert len(mx) == 1
    assert "Return-Path (bounces)" in mx[0].message
    assert "news.missing.example" in mx[0].message
