"""Fixtures for the online checks: a DKIM key, a throwaway CA, and servers on 127.0.0.1."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dkimkeys import dkim_value
from support.dnszone import ZoneResolver, dns_server
from support.websites import Site, website


def _names(depth: int) -> list[str]:
    """w, w0, w1, w00, ... down to `depth` levels (the last level has no record)."""
    names, level = [], ["w"]
    for _ in range(depth):
        names += level
        level = [name + bit for name in level for bit in "01"]
    return names


@pytest.fixture(scope="session")
def dkim_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "test-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture(scope="module")
def http_site() -> Iterator[Site]:
    with website() as site:
        yield site


@pytest.fixture(scope="module")
def https_site(ca: trustme.CA) -> Iterator[Site]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "links.example").configure_cert(context)
    with website(context) as site:
        yield site


@pytest.fixture(scope="module")
def untrusted_site() -> Iterator[Site]:
    """HTTPS with a certificate from a CA nobody trusts: the TLS-broken link."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(context)
    with website(context) as site:
        yield site


@pytest.fixture(scope="module")
def dns(
    dkim_key: rsa.RSAPrivateKey, other_key: rsa.RSAPrivateKey
) -> Iterator[tuple[int, ZoneResolver]]:
    zone = {
        # good.example: everything right; DMARC only on the organizational domain.
        ("news.good.example", "TXT"): [
            "v=spf1 ip4:192.0.2.0/24 include:_spf.good.example -all",
            "x=1",
        ],
        ("_spf.good.example", "TXT"): ["v=spf1 ip6:2001:db8::/32 a mx ~all"],
        ("_spf.good.example", "A"): ["192.0.2.10"],
        ("_spf.good.example", "MX"): ["10 mx.good.example"],
        ("nl._domainkey.news.good.example", "TXT"): [dkim_value(dkim_key)],
        ("_dmarc.good.example", "TXT"): ["v=DMARC1; p=none; rua=mailto:d@good.example"],
        ("news.good.example", "MX"): ["10 mx.good.example"],
        # SPF gone wrong in every way a receiver notices.
        ("plusall.example", "TXT"): ["v=spf1 +all"],
        ("bareall.example", "TXT"): ["v=spf1 ip4:192.0.2.1 all"],
        ("neutral.example", "TXT"): ["v=spf1 ip4:192.0.2.1 ?all"],
        ("noall.example", "TXT"): ["v=spf1 ip4:192.0.2.1"],
        ("many.example", "TXT"): [
            "v=spf1 " + " ".join(f"include:i{n}.many.example" for n in range(11)) + " -all"
        ],
        **{(f"i{n}.many.example", "TXT"): ["v=spf1 -all"] for n in range(11)},
        ("deep.example", "TXT"): ["v=spf1 include:a.deep.example include:b.deep.example -all"],
        ("a.deep.example", "TXT"): ["v=spf1 a mx ptr exists:x.deep.example a:y.deep.example -all"],
        ("b.deep.example", "TXT"): ["v=spf1 mx mx:z.deep.example a -all"],
        # Every name deep.example's terms ask for exists: 10 lookups, none void.
        **{(f"{n}.deep.example", "A"): ["192.0.2.20"] for n in ("a", "b", "x", "y")},
        **{(f"{n}.deep.example", "MX"): ["10 mx.deep.example"] for n in ("a", "b", "z")},
        # a and b both include c: 4 lookups, a diamond, no loop.
        ("diamond.example", "TXT"): [
            "v=spf1 include:a.diamond.example include:b.diamond.example -all"
        ],
        ("a.diamond.example", "TXT"): ["v=spf1 include:c.diamond.example -all"],
        ("b.diamond.example", "TXT"): ["v=spf1 include:c.diamond.example -all"],
        ("c.diamond.example", "TXT"): ["v=spf1 ip4:192.0.2.1 -all"],
        # Eleven levels, each name including two of the next: 4,094 lookups if walked through.
        **{
            (f"{name}.wide.example", "TXT"): [
                f"v=spf1 include:{name}0.wide.example include:{name}1.wide.example -all"
            ]
            for name in _names(11)
        },
        # An endless chain of distinct names (2,000 here): cut at the 11th lookup.
        **{
            (f"c{n}.chain.example", "TXT"): [f"v=spf1 include:c{n + 1}.chain.example -all"]
            for n in range(2000)
        },
        # A loop two names long, and one through a redirect.
        ("ping.example", "TXT"): ["v=spf1 include:pong.example -all"],
        ("pong.example", "TXT"): ["v=spf1 include:ping.example -all"],
        ("self.example", "TXT"): ["v=spf1 ip4:192.0.2.1 redirect=self.example"],
        # Void lookups: two are allowed, the third breaks the record.
        ("twovoid.example", "TXT"): ["v=spf1 a:gone1.example mx:gone2.example -all"],
        ("threevoid.example", "TXT"): [
            "v=spf1 a:gone1.example mx:gone2.example exists:gone3.example -all"
        ],
        ("manymx.example", "TXT"): ["v=spf1 mx -all"],
        ("manymx.example", "MX"): [f"{n} mx{n}.manymx.example" for n in range(11)],
        ("macro.example", "TXT"): ["v=spf1 exists:%{i}.rbl.example a:%{d}.x.example -all"],
        ("two.example", "TXT"): ["v=spf1 -all", "v=spf1 mx -all"],
        ("dangling.example", "TXT"): ["v=spf1 include:nothing.example -all"],
        ("badip.example", "TXT"): ["v=spf1 ip4:300.1.1.1 -all"],
        ("v6as4.example", "TXT"): ["v=spf1 ip4:2001:db8::1 -all"],
        ("loop.example", "TXT"): ["v=spf1 include:loop.example -all"],
        ("unknown.example", "TXT"): ["v=spf1 foo:bar -all"],
        ("redirect.example", "TXT"): ["v=spf1 redirect=_spf.good.example"],
        # DKIM keys that are not the configured one.
        ("nl._domainkey.wrong.example", "TXT"): [dkim_value(other_key)],
        ("nl._domainkey.revoked.example", "TXT"): ["v=DKIM1; k=rsa; p="],
        ("nl._domainkey.testing.example", "TXT"): [dkim_value(dkim_key) + "; t=y"],
        ("nl._domainkey.garbage.example", "TXT"): ["v=DKIM1; k=rsa; p=bm90IGEga2V5"],
        ("nl._domainkey.twice.example", "TXT"): [dkim_value(dkim_key), dkim_value(other_key)],
        # DMARC.
        ("_dmarc.news.own.example", "TXT"): ["v=DMARC1; p=reject"],
        ("_dmarc.broken.example", "TXT"): ["v=DMARC1; p=maybe"],
        ("_dmarc.strict.example", "TXT"): ["v=DMARC1; p=quarantine; adkim=s; aspf=s"],
        ("_dmarc.relaxed.example", "TXT"): ["v=DMARC1; p=quarantine"],
        ("_dmarc.double.example", "TXT"): ["v=DMARC1; p=none", "v=DMARC1; p=reject"],
        # MX.
        ("nullmx.example", "MX"): ["0 ."],
        # unsigned.example takes mail but publishes no SPF, DKIM or DMARC.
        ("news.unsigned.example", "MX"): ["10 mx.unsigned.example"],
        ("aonly.example", "A"): ["192.0.2.7"],
    }
    with dns_server(zone) as server:
        yield server
