"""A name and a record type in, the records' text out: DNS through the configured resolver.

`[check] nameservers` points the resolver at given servers ("IP" or "IP:PORT"); without it the
system's (/etc/resolv.conf) is used. Answers go into the preflight cache for their TTL (at most
`[check] cache_ttl`), "no such record" for a minute, so a repeated check asks nothing. A resolver
that does not answer at all raises UnreachableError: the caller reports the machine as offline.
"""

from __future__ import annotations

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver
from dns.rdtypes.ANY.MX import MX
from dns.rdtypes.ANY.TXT import TXT

from newsletter.preflight.cache import Cache
from newsletter.settings import CheckSettings, nameserver_address

NEGATIVE_TTL = 60.0  # seconds "no such record" is believed: long enough for one preview session


class UnreachableError(Exception):
    """No usable answer: no nameserver answered, or every one failed for this name."""


class Lookup:
    """One resolver for a preflight run; `queries` counts what really went to the network."""

    def __init__(self, config: CheckSettings, cache: Cache) -> None:
        self._cache = cache
        self._ttl = config.cache_ttl
        self._problem: str | None = None
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
            raise UnreachableError(self._problem)
        self.queries += 1
        try:
            answer = await self._resolver.resolve(name, rdtype, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            self._cache.put(key, [], min(NEGATIVE_TTL, self._ttl))
            return []
        except dns.resolver.NoNameservers as exc:
            raise UnreachableError(
                f"{self.where} gave no usable answer for {name} ({exc})"
            ) from None
        except dns.exception.Timeout:
            raise UnreachableError(
                f"no answer from {self.where} within {self._resolver.lifetime:g} s"
            ) from None
        except dns.exception.DNSException as exc:
            raise UnreachableError(f"{name}: {exc}") from None
        values = [_text(rdata) for rdata in answer]
        ttl = answer.rrset.ttl if answer.rrset is not None else NEGATIVE_TTL
        self._cache.put(key, values, min(float(ttl), self._ttl))
        return values


def _text(rdata: object) -> str:
    if isinstance(rdata, TXT):
        return b"".join(rdata.strings).decode("utf-8", "replace")
    if isinstance(rdata, MX):
        return f"{rdata.preference} {rdata.exchange.to_text(omit_final_dot=True) or '.'}"
    return str(rdata)
