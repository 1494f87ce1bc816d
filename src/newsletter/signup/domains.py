"""An address in; whether its domain can take mail, and why not, out: the syntax (the lists'
own check), `[signup] blocked_domains`, the disposable-email-domains list, then DNS: an MX
record, or with none an A or AAAA record (RFC 5321 5.1's implicit MX).

Refused: an invalid address, a listed domain (or one below it), a domain that does not exist
(NXDOMAIN), one that publishes a null MX (RFC 7505: "0 ."), one with no MX, A or AAAA. A
resolver that fails (timeout, SERVFAIL, no nameserver) makes the verdict UNKNOWN, not refused:
the confirmation mail is the real test of an address, and a signup page must not go dark with
the resolver; the caller lets it through. So does a resolver that calls every name NXDOMAIN (a
captive network's, a broken one's): a domain's NXDOMAIN is believed only when the same resolver
finds the root zone, which always exists (asked once a minute at most).

The domain comes from a stranger, so the lookups are bounded: `[signup] dns_timeout` per
question, a few questions at a time, one lookup per domain however many posts name it at once
(the others wait for its answer), answers kept for their TTL (at most an hour) in a table of
fixed size.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver
from disposable_email_domains import blocklist as disposable_domains

from newsletter.config.settings import SignupSettings, nameserver_address
from newsletter.importers.subscribers import address_key

MAX_TTL = 3600.0
NEGATIVE_TTL = 300.0  # "no such domain" and "no records": believed for five minutes
MAX_CACHED = 10_000
MAX_LOOKUPS = 8  # domains looked up at once
ROOT_TTL = 60.0  # seconds a verdict on the resolver itself (does it find the root?) is kept

Clock = Callable[[], float]


class DomainStatus(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    UNKNOWN = "unknown"  # the resolver failed: let the signup through, the mail will tell


@dataclass(frozen=True)
class DomainVerdict:
    status: DomainStatus
    reason: str = ""  # in English, for the log
    # A refusal's kind, for the visitor's page in its own language (i18n.PAGES' `domain_KIND`,
    # with `{domain}` the domain at fault): invalid, blocked, disposable, missing, null-mx, no-mail.
    kind: str = ""
    domain: str = ""

    @property
    def refused(self) -> bool:
        return self.status is DomainStatus.REFUSED


def listed(domain: str, names: frozenset[str] | set[str]) -> str | None:
    """The entry of `names` that `domain` is or is below, if any."""
    labels = domain.split(".")
    for start in range(len(labels) - 1):
        candidate = ".".join(labels[start:])
        if candidate in names:
            return candidate
    return None


class DomainCheck:
    """The check as `[signup]` configures it; one instance per process (it keeps the cache)."""

    def __init__(
        self,
        config: SignupSettings,
        *,
        resolver: dns.asyncresolver.Resolver | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._config = config
        self._blocked = frozenset(config.blocked_domains)
        self._clock = clock
        self._resolver = resolver or _resolver(config)
        self._cache: OrderedDict[str, tuple[float, DomainVerdict]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[DomainVerdict]] = {}
        self._slots = asyncio.Semaphore(MAX_LOOKUPS)
        self._root: tuple[float, bool] | None = None  # (until, the resolver finds the root)
        self.lookups = 0  # domains that went to the resolver

    async def check(self, address: str) -> DomainVerdict:
        try:
            domain = address_key(address).rpartition("@")[2]
        except ValueError as exc:
            return DomainVerdict(DomainStatus.REFUSED, f"not a valid address: {exc}", "invalid")
        hit = listed(domain, self._blocked)
        if hit is not None:
            return DomainVerdict(
                DomainStatus.REFUSED, f"{hit} is on the blocked list", "blocked", hit
            )
        if self._config.refuse_disposable:
            hit = listed(domain, disposable_domains)
            if hit is not None:
                reason = f"{hit} hands out disposable addresses"
                return DomainVerdict(DomainStatus.REFUSED, reason, "disposable", hit)
        if not self._config.check_dns:
            return DomainVerdict(DomainStatus.OK)
        return await self._dns(domain)

    async def _dns(self, domain: str) -> DomainVerdict:
        now = self._clock()
        cached = self._cache.get(domain)
        if cached is not None and cached[0] > now:
            return cached[1]
        waiting = self._pending.get(domain)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[DomainVerdict] = asyncio.get_running_loop().create_future()
        self._pending[domain] = future
        try:
            async with self._slots:
                self.lookups += 1
                verdict, ttl = await self._lookup(domain)
            if verdict.status is not DomainStatus.UNKNOWN:
                self._remember(domain, verdict, ttl)
            future.set_result(verdict)
            return verdict
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._pending[domain]

    async def _lookup(self, domain: str) -> tuple[DomainVerdict, float]:
        mx = await self._ask(domain, "MX")
        if isinstance(mx, DomainVerdict):
            return mx, NEGATIVE_TTL
        if mx is not None:
            records, ttl = mx
            exchanges = {str(r.exchange).rstrip(".") for r in records}
            if exchanges == {""}:
                reason = f"{domain} accepts no mail (null MX)"
                return DomainVerdict(DomainStatus.REFUSED, reason, "null-mx", domain), ttl
            return DomainVerdict(DomainStatus.OK), ttl
        for kind in ("A", "AAAA"):
            found = await self._ask(domain, kind)
            if isinstance(found, DomainVerdict):
                return found, NEGATIVE_TTL
            if found is not None:
                return DomainVerdict(DomainStatus.OK), found[1]
        reason = f"{domain} has no MX, A or AAAA record: mail cannot be delivered there"
        return DomainVerdict(DomainStatus.REFUSED, reason, "no-mail", domain), NEGATIVE_TTL

    async def _ask(self, domain: str, kind: str) -> tuple[list[Any], float] | DomainVerdict | None:
        """(records, ttl), None when the name has none of this type, or the final verdict."""
        try:
            answer = await self._resolver.resolve(domain + ".", kind, search=False)
        except dns.resolver.NXDOMAIN:
            if not await self._finds_root():
                reason = (
                    f"{domain} not checked: the resolver says no name exists, the root zone's "
                    "included"
                )
                return DomainVerdict(DomainStatus.UNKNOWN, reason)
            return DomainVerdict(
                DomainStatus.REFUSED, f"{domain} does not exist", "missing", domain
            )
        except dns.resolver.NoAnswer:
            return None
        except (dns.exception.DNSException, OSError) as exc:
            return DomainVerdict(DomainStatus.UNKNOWN, f"the lookup of {domain} failed: {exc}")
        ttl = float(answer.rrset.ttl) if answer.rrset is not None else NEGATIVE_TTL
        return list(answer), ttl

    async def _finds_root(self) -> bool:
        """Does the resolver answer for the root zone? If not, its NXDOMAIN says nothing."""
        now = self._clock()
        if self._root is not None and self._root[0] > now:
            return self._root[1]
        try:
            await self._resolver.resolve(".", "NS", search=False)
            found = True
        except dns.resolver.NoAnswer:
            found = True  # the root exists, it just lists no NS here
        except (dns.exception.DNSException, OSError):
            found = False
        self._root = (now + ROOT_TTL, found)
        return found

    def _remember(self, domain: str, verdict: DomainVerdict, ttl: float) -> None:
        cache = self._cache
        cache[domain] = (self._clock() + min(max(ttl, 1.0), MAX_TTL), verdict)
        cache.move_to_end(domain)
        while len(cache) > MAX_CACHED:
            cache.popitem(last=False)


def _resolver(config: SignupSettings) -> dns.asyncresolver.Resolver:
    if config.nameservers:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [
            dns.nameserver.Do53Nameserver(*nameserver_address(entry))
            for entry in config.nameservers
        ]
    else:
        try:
            resolver = dns.asyncresolver.Resolver()
        except dns.resolver.NoResolverConfiguration:
            resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.timeout = config.dns_timeout
    resolver.lifetime = config.dns_timeout
    resolver.cache = None  # this module's cache is bounded; dnspython's would not be here
    return resolver
