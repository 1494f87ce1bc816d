"""A real DNS server on 127.0.0.1 (UDP, a free port) answering from a dict of records.

`zone` maps (name, type) to values: TXT strings (split into 255-byte strings as on the wire),
"PREF HOST" for MX, addresses for A/AAAA. A name that has any record answers NOERROR with no
data for the other types; any other name is NXDOMAIN, as a real authoritative server does (the
root zone, "", exists: NOERROR, no data).
`failures` maps a name (and the names under it; "" is every name, the root's too) to the failure
it gets instead (SERVFAIL, REFUSED): a broken zone, or a resolver on a network that is down.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dnslib import AAAA, MX, QTYPE, RCODE, RR, TXT, A, DNSLabel, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from support import POLL

Zone = dict[tuple[str, str], list[str]]


class ZoneResolver(BaseResolver):  # type: ignore[misc]
    def __init__(self, zone: Zone, failures: dict[str, str] | None = None) -> None:
        self.zone = zone
        self.failures = failures or {}
        self.queries: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        kind = QTYPE[request.q.qtype]
        with self.lock:
            self.queries.append((name, kind))
        for suffix, rcode in self.failures.items():
            if suffix in ("", name) or name.endswith("." + suffix):
                reply.header.rcode = getattr(RCODE, rcode)
                return reply
        values = self.zone.get((name, kind))
        if values is None:
            # The root zone always exists, as it does for a real resolver.
            if name and not any(key[0] == name for key in self.zone):
                reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for value in values:
            reply.add_answer(
                RR(DNSLabel(name), QTYPE.reverse[kind], ttl=300, rdata=_rdata(kind, value))
            )
        return reply


def _rdata(kind: str, value: str) -> object:
    if kind == "TXT":
        raw = value.encode()
        return TXT([raw[i : i + 255] for i in range(0, len(raw), 255)] or [b""])
    if kind == "MX":
        preference, host = value.split(" ", 1)
        return MX(host, int(preference))
    if kind == "A":
        return A(value)
    if kind == "AAAA":
        return AAAA(value)
    raise ValueError(kind)


@contextmanager
def dns_server(
    zone: Zone, failures: dict[str, str] | None = None
) -> Iterator[tuple[int, ZoneResolver]]:
    """Serve `zone` until the block ends; yields (port, resolver) (resolver.queries logs them)."""
    resolver = ZoneResolver(zone, failures)
    logger = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)
    udp = DNSServer(resolver, address="127.0.0.1", port=0, logger=logger)
    # UDP only: dnslib never truncates, so the resolver never needs to retry over TCP.
    # (Not udp.start_thread(): its serve_forever looks for shutdown every 0.5 s, which every
    # test that starts a server waited out at its end.)
    thread = threading.Thread(target=udp.server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield udp.server.server_address[1], resolver
    finally:
        udp.server.shutdown()
        udp.server.server_close()


def closed_port() -> int:
    """A UDP port on 127.0.0.1 with nobody listening (the 'offline' resolver)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
