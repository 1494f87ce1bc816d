"""Who is asking: the socket's peer and the X-Forwarded-For headers in; the client's address out,
believing X-Forwarded-For only as far as `[serve] trusted_proxies` vouch for it.

Each proxy appends the address it got the request from, so the header reads left to right from
the client to the last proxy, and anyone may have written its left part. It is therefore read
from the right: start at the peer; while the address in hand is a trusted proxy, step to the
entry left of it; the first address that is not a trusted proxy is the client. An entry that is
not an address (garbage, "unknown", an obfuscated name) stops the walk at the last proxy that
was trusted: nothing left of it can be checked. Header lines are joined in order (RFC 9110
allows a list split over several lines); the rightmost MAX_HOPS entries of at most MAX_HEADER
characters are read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_HOPS = 32
MAX_HEADER = 4096  # characters of X-Forwarded-For read; a real chain is far shorter


@lru_cache(maxsize=8)
def trusted_networks(entries: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """`[serve] trusted_proxies` (already validated by settings) as networks."""
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def parse_address(text: str) -> IPAddress | None:
    """One hop as proxies write it: an IPv4 or IPv6 address, bracketed or with a port
    ("192.0.2.1:4711", "[2001:db8::1]:443"); IPv4-mapped IPv6 as IPv4; None if it is none."""
    text = text.strip()
    if text.startswith("["):
        text, closed, rest = text[1:].partition("]")
        if not closed or (rest and not rest[1:].isdigit()) or (rest and rest[0] != ":"):
            return None
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.scope_id:
            return None
    return address


def client_ip(
    peer: str | None, forwarded_for: Iterable[str], trusted: Sequence[IPNetwork]
) -> str | None:
    """The client's address: `peer` (the socket's), or, through trusted proxies, an entry of
    `forwarded_for` (the X-Forwarded-For header lines, in order). None without a peer."""
    current = parse_address(peer) if peer else None
    if current is None:
        return None
    if not _trusted(current, trusted):
        return str(current)
    joined = ",".join(forwarded_for)
    hops = joined[-MAX_HEADER:].split(",")
    if len(joined) > MAX_HEADER:
        hops[0] = "cut"  # the entry the cut went through is no address; the walk stops at it
    hops = [hop for hop in hops if hop.strip()][-MAX_HOPS:]
    for hop in reversed(hops):
        address = parse_address(hop)
        if address is None:
            break  # unreadable: nothing left of it can be checked
        current = address
        if not _trusted(current, trusted):
            break
    return str(current)


def _trusted(address: IPAddress, trusted: Sequence[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in trusted)


def scope_client_ip(scope: Mapping[str, Any], trusted: Sequence[IPNetwork]) -> str | None:
    """client_ip for an ASGI request. The peer must be the socket's: with uvicorn's own
    proxy_headers on, scope["client"] would already be its reading of X-Forwarded-For."""
    client = scope.get("client")
    lines = [
        value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name == b"x-forwarded-for"
    ]
    return client_ip(client[0] if client else None, lines, trusted)
