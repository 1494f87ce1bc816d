"""A name and a record type in, the records' text out: DNS through the configured resolver.

`[check] nameservers` points the resolver at given servers ("IP" or "IP:PORT"); without it the
system's (/etc/resolv.conf) is used. Answers go into the preflight cache for their TTL (at most
`[check] cache_ttl`), "no such record" for a minute, so a repeated check asks nothing. A resolver
that fails a question (no answer, SERVFAIL, REFUSED) raises UnreachableError for that name, or,
when the resolver fails every question, NetworkDownError: the run then says so once, instead of one
line per record. "Every question" is told from "this name" by one more question, asked beside the
first one that goes to the network: the root zone's NS. When a name fails (or "does not exist"),
nothing else got an answer and the root failed too (or "does not exist", which it always does),
the resolver (or the network) is down: a captive network's resolver says NXDOMAIN to everything.
"""

from __future__ import annotations

import asyncio
import re

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver
from dns.rdtypes.ANY.MX import MX
from dns.rdtypes.ANY.TXT import TXT

from newsletter.config.settings import CheckSettings, nameserver_address
from newsletter.state.statecache import Cache

NEGATIVE_TTL = 60.0  # seconds "no such record" is believed: long enough for one preview session


class UnreachableError(Exception):
    """No usable answer: no nameserver answered, or every one failed for this name."""


class NetworkDownError(Exception):
    """The resolver fails every question, the root zone's included: no online check can run."""


class Lookup:
    """One resolver for a preflight run; `queries` counts what really went to the network."""

    def __init__(self, config: CheckSettings, cache: Cache) -> None:
        self._cache = cache
        self._ttl = config.cache_ttl
        self._problem: str | None = None
        self._answered = False  # some question got an answer: the resolver works
        self._probe: asyncio.Future[bool] | None = None  # is the resolver down? asked once
        self.queries = 0
        if config.nameservers:
            self._resolver = dns.asyncresolver.Resolver(configure=False)
            self._resolver.nameservers = [
                dns.nameserver.Do53Nameserver(*nameserver_address(entry))
                for entry in config.nameservers
            ]
            self.where = ", ".join(config.nameservers)
        else:
            try:
                self._resolver = dns.asyncresolver.Resolver()
            except dns.resolver.NoResolverConfiguration:
                self._resolver = dns.asyncresolver.Resolver(configure=False)
                self._problem = "no nameserver is configured (/etc/resolv.conf)"
            self.where = "the system resolver"
        self._resolver.lifetime = config.timeout
        self._resolver.timeout = config.timeout
        self._resolver.cache = None  # the file cache keeps answers across runs instead

    async def txt(self, name: str) -> list[str]:
        """Every TXT record at `name`, its strings joined (a long DKIM key spans several)."""
        return await self._records(name, "TXT")

    async def mx(self, name: str) -> list[tuple[int, str]]:
        """(preference, exchange) pairs; an exchange of "." is a null MX (RFC 7505)."""
        records = await self._records(name, "MX")
        pairs = [record.split(" ", 1) for record in records]
        return sorted((int(preference), host) for preference, host in pairs)

    async def addresses(self, name: str) -> list[str]:
        return await self._records(name, "A") + await self._records(name, "AAAA")

    async def _records(self, name: str, rdtype: str) -> list[str]:
        key = f"dns:{rdtype}:{name.lower().rstrip('.')}"
        cached = self._cache.get(key)
        if isinstance(cached, list):
            return [str(value) for value in cached]
        if self._problem is not None:
            raise NetworkDownError(self._problem)
        if not self._answered and self._probe is None:
            # Asked beside the first question, so a silent resolver costs one timeout, not two.
            self._probe = asyncio.ensure_future(self._ask_root())
        self.queries += 1
        try:
            answer = await self._resolver.resolve(name, rdtype, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer) as exc:
            # "No such name" from a resolver that says it of the root zone too is a captive
            # network's or a broken resolver's answer to everything, not this name's.
            if isinstance(exc, dns.resolver.NXDOMAIN) and await self._down():
                raise NetworkDownError(self._describe_down(name, exc)) from None
            self._answered = True
            self._cache.put(key, [], min(NEGATIVE_TTL, self._ttl))
            return []
        except dns.exception.DNSException as exc:
            failure = self._describe(name, exc)
            if await self._down():
                raise NetworkDownError(self._describe_down(name, exc)) from None
            raise UnreachableError(failure) from None
        self._answered = True
        values = [_text(rdata) for rdata in answer]
        ttl = answer.rrset.ttl if answer.rrset is not None else NEGATIVE_TTL
        self._cache.put(key, values, min(float(ttl), self._ttl))
        return values

    def _describe(self, name: str, exc: dns.exception.DNSException) -> str:
        if isinstance(exc, dns.resolver.NoNameservers):
            return f"{self.where} gave no usable answer for {name} ({_rcodes(exc)})"
        if isinstance(exc, dns.exception.Timeout):
            return f"no answer from {self.where} within {self._resolver.lifetime:g} s"
        return f"{name}: {exc}"

    def _describe_down(self, name: str, exc: dns.exception.DNSException) -> str:
        if isinstance(exc, dns.exception.Timeout):
            return f"no answer from {self.where} within {self._resolver.lifetime:g} s"
        return (
            f"{self.where} fails every question ({_rcodes(exc)} for {name}, and for the root "
            "zone too)"
        )

    async def _down(self) -> bool:
        """After a failure: does the resolver fail the root zone's NS too? Asked once a run,
        and not at all once any question got an answer."""
        if self._answered:
            return False
        if self._probe is None:
            self._probe = asyncio.ensure_future(self._ask_root())
        return await asyncio.shield(self._probe)

    async def _ask_root(self) -> bool:
        """True when the root zone's NS fails, or "does not exist": the root always does."""
        self.queries += 1
        try:
            await self._resolver.resolve(".", "NS", search=False)
        except dns.resolver.NoAnswer:
            return False
        except dns.exception.DNSException:  # NXDOMAIN included
            return True
        return False


def _rcodes(exc: dns.exception.DNSException) -> str:
    """dnspython's "Server X answered SERVFAIL; ..." as "SERVFAIL" (each kind once)."""
    if isinstance(exc, dns.resolver.NXDOMAIN):
        return "NXDOMAIN"
    found = re.findall(r"answered ([A-Z]+)\b", str(exc))
    return "/".join(dict.fromkeys(found)) or str(exc)


def _text(rdata: object) -> str:
    if isinstance(rdata, TXT):
        return b"".join(rdata.strings).decode("utf-8", "replace")
    if isinstance(rdata, MX):
        return f"{rdata.preference} {rdata.exchange.to_text(omit_final_dot=True) or '.'}"
    return str(rdata)
