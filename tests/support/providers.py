"""Mailbox providers whose bounces and complaints prove where they come from: one RSA key,
published as the DKIM key (selector SELECTOR) of each of their domains on a real DNS server on
loopback. `keys` is the lookup `newsletter bounces` makes, `nameserver` what [check]
nameservers is set to, `resolver.queries` every question the server was asked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.bounces.origin import DkimKeys
from support.dkimkeys import dkim_value
from support.dnszone import ZoneResolver, dns_server
from support.dsn import SELECTOR, signed

# The readers' domains, a feedback loop's, and a stranger's (who can sign for its own domain).
SIGNING_DOMAINS = ("example.org", "example.com", "yahoo.com", "stranger.example")


@dataclass
class Provider:
    key: rsa.RSAPrivateKey
    keys: DkimKeys
    nameserver: str
    resolver: ZoneResolver

    def sign(self, raw: bytes, domain: str, **options: object) -> bytes:
        return signed(raw, self.key, domain, **options)


@contextmanager
def run_providers(key: rsa.RSAPrivateKey) -> Iterator[Provider]:
    value = dkim_value(key)
    zone = {(f"{SELECTOR}._domainkey.{d}", "TXT"): [value] for d in SIGNING_DOMAINS}
    with dns_server(zone) as (port, resolver):
        keys = DkimKeys([("127.0.0.1", port)], timeout=2.0)
        yield Provider(key, keys, f"127.0.0.1:{port}", resolver)
