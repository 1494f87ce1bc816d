"""The link check never reaches loopback, private, link-local or reserved addresses unless
`[check] allow_private` says so: links, names that resolve there, and redirects, checked at the
address really connected to. Servers on 127.0.0.1 and 127.0.0.2 count what reaches them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from dnslib import QTYPE, RR, A, DNSLabel, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from newsletter.cli.main import cli
from newsletter.config.settings import CheckSettings
from newsletter.preflight import report
from newsletter.preflight.connect import address_refusal
from newsletter.preflight.lookup import Lookup
from newsletter.state.statecache import Cache
from support import POLL
from support.dnszone import ZoneResolver, dns_server
from support.linkchecks import check
from support.onlineproject import configure, write_issue
from support.websites import Site, website

ONLY_FIRST = ["127.0.0.1/32"]  # the first test server allowed, every other address refused
REFUSED = "the link check reaches public addresses only ([check] allow_private)"


@pytest.fixture(scope="module")
def other_site(http_site: Site) -> Iterator[Site]:
    """A server on 127.0.0.2, on the same port as http_site: where a hostile redirect or DNS
    answer points."""
    with website(host="127.0.0.2", port=port_of(http_site)) as site:
        yield site


def port_of(site: Site) -> int:
    return int(site.base.rsplit(":", 1)[1])


def served(site: Site) -> int:
    return sum(site.requests.values())


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fd00::1", "a private address"),
        ("169.254.169.254", "a link-local address"),  # cloud metadata
        ("fe80::1", "a link-local address"),
        ("0.0.0.0", "the unspecified address (this machine)"),
        ("224.0.0.1", "a multicast address"),
        ("100.64.0.1", "a reserved address"),  # carrier-grade NAT
        ("198.18.0.1", "a private address"),  # benchmarking
        ("240.0.0.1", "a private address"),
        ("192.0.2.1", "a private address"),  # documentation
        ("::ffff:127.0.0.1", "a loopback address"),  # IPv4-mapped
        ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a01:203", "a private address"),  # NAT64 of 10.1.2.3
    ],
)
def test_addresses_outside_the_public_internet_are_refused(address: str, kind: str) -> None:
    assert address_refusal(address, False) == kind
    assert address_refusal(address, True) is None


def test_public_addresses_pass_and_listed_networks_are_allowed() -> None:
    assert address_refusal("93.184.215.14", False) is None
    assert address_refusal("2606:4700::1111", False) is None
    assert address_refusal("10.1.2.3", ["10.1.0.0/16"]) is None
    assert address_refusal("10.2.0.1", ["10.1.0.0/16"]) == "a private address"
    assert (
        address_refusal("::ffff:10.1.2.3", ["10.1.0.0/16"]) is None
    )  # judged as the IPv4 it carries


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
        ("0.0.0.0", "0.0.0.0 is the unspecified address (this machine)"),  # reaches 127.0.0.1
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1 is a loopback address"),
    ],
)
def test_links_to_this_machine_are_refused_unfetched(http_site: Site, host: str, said: str) -> None:
    url = f"http://{host}:{port_of(http_site)}/ok?refused"
    before = served(http_site)
    results, _ = check([url], allow_private=False)
    assert results[url].error == f"refused: {said}: {REFUSED}"
    assert [f.level for f in report.link_findings(results, {})] == ["error"]
    assert served(http_site) == before  # nothing reached the server


def test_a_name_that_resolves_to_loopback_is_refused(http_site: Site) -> None:
    url = f"http://inside.example:{port_of(http_site)}/ok?name"
    before = served(http_site)
    with dns_server({("inside.example", "A"): ["127.0.0.1"]}) as (dns_port, _):
        config = CheckSettings(nameservers=[f"127.0.0.1:{dns_port}"])
        results, _ = check([url], lookup=Lookup(config, Cache(None)), allow_private=False)
    assert results[url].error == (
        f"refused: inside.example resolves to 127.0.0.1, a loopback address: {REFUSED}"
    )
    assert served(http_site) == before


def test_redirects_into_private_addresses_are_refused(http_site: Site, other_site: Site) -> None:
    """The first server stands for a public site (allowed by name); it redirects to another
    address of this machine, directly and through a name."""
    port = port_of(other_site)
    direct = http_site.url("/to?url=" + quote(other_site.url("/ok"), safe=""))
    named = http_site.url("/to?url=" + quote(f"http://inside.example:{port}/ok", safe=""))
    with dns_server({("inside.example", "A"): ["127.0.0.2"]}) as (dns_port, _):
        lookup = Lookup(CheckSettings(nameservers=[f"127.0.0.1:{dns_port}"]), Cache(None))
        results, _ = check([direct, named], lookup=lookup, allow_private=ONLY_FIRST)
    assert results[direct].error == f"refused: 127.0.0.2 is a loopback address: {REFUSED}"
    assert results[direct].redirects == [(302, other_site.url("/ok"))]
    assert results[named].error == (
        f"refused: inside.example resolves to 127.0.0.2, a loopback address: {REFUSED}"
    )
    assert served(other_site) == 0
    (finding,) = report.link_findings({direct: results[direct]}, {})
    assert str(finding) == (
        f"error: {direct}: refused: 127.0.0.2 is a loopback address: {REFUSED} "
        f"(via 302, ending at {other_site.url('/ok')}) [link-check]"
    )
    # Listed, the same address is fetched.
    allowed, _ = check([direct], allow_private=[*ONLY_FIRST, "127.0.0.2"])
    assert allowed[direct].status == 200
    assert served(other_site) == 1
    other_site.requests.clear()


class _Rebinding(BaseResolver):  # type: ignore[misc]
    """rebind.example: 127.0.0.1 to the first question, 127.0.0.2 to every later one, TTL 0."""

    def __init__(self) -> None:
        self.asked = 0

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        reply = request.reply()
        if QTYPE[request.q.qtype] == "A":
            self.asked += 1
            address = "127.0.0.1" if self.asked == 1 else "127.0.0.2"
            reply.add_answer(RR(DNSLabel("rebind.example"), QTYPE.A, ttl=0, rdata=A(address)))
        return reply


@pytest.mark.slow
def test_each_connection_goes_to_the_address_checked_for_it(
    http_site: Site, other_site: Site
) -> None:
    """A name that rebinds between two connections (the test servers close every connection)
    is checked again for the second, and the refused address is never connected to, though a
    server listens there on the same port."""
    resolver = _Rebinding()
    logger = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)
    server = DNSServer(resolver, address="127.0.0.1", port=0, logger=logger)
    thread = threading.Thread(target=server.server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        url = f"http://rebind.example:{port_of(http_site)}/found?rebind"
        nameserver = f"127.0.0.1:{server.server.server_address[1]}"
        lookup = Lookup(CheckSettings(nameservers=[nameserver]), Cache(None))
        results, _ = check([url], lookup=lookup, allow_private=ONLY_FIRST)
    finally:
        server.stop()
        server.server.server_close()
    assert results[url].redirects == [(302, f"http://rebind.example:{port_of(http_site)}/ok")]
    assert results[url].error == (
        f"refused: rebind.example resolves to 127.0.0.2, a loopback address: {REFUSED}"
    )
    assert served(other_site) == 0


@pytest.mark.slow
def test_the_cli_refuses_by_default_and_says_how_to_allow(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    configure(
        project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base, allow_private=None
    )
    url = http_site.url("/ok?cli-private")
    before = served(http_site)
    write_issue(project, 15, {"内": [url]})
    result = CliRunner().invoke(cli, ["check", "--issue", "15", "--online"])
    assert result.exit_code == 1
    refused = f"{url}: refused: 127.0.0.1 is a loopback address: {REFUSED}"
    assert f"error: 「内」 in 「项目」: {refused} [link-check]" in result.stdout.splitlines()
    assert served(http_site) == before
    assert "error: the unsubscribe endpoint does not answer" in result.stdout
