"""A domain in, what is wrong with its SPF record out (RFC 7208), as Faults.

Checked: exactly one `v=spf1` record; every term known and well-formed; the limits of RFC 7208
4.6.4, counted as a receiver counts them when no term matches (the worst case, a forger's, and a
real sender's matched at the last term): at most 10 terms that cost a DNS lookup (include, a, mx,
ptr, exists, redirect) through every include and redirect, an include walked as often as it is
reached (a diamond, a and b both including c, counts c twice and is no loop); at most 2 "void"
lookups (a, mx, exists naming something with no record); at most 10 MX hosts per mx. Past a
limit receivers stop and fail SPF as a whole ("permerror"), so the walk stops there too: an
endless chain of includes costs 11 TXT queries, not thousands. A loop is a name that includes
(or redirects to) one of the names on its own way down. Every include and redirect target has a
record of its own; and the policy ends in `-all` or `~all`, never `+all` (anyone may send as you)
and never without an ending (a neutral result for everyone).

Terms with macros (`%{i}`) depend on the sending host and are counted, not resolved.

Why our own walker and not checkdmarc or pyspf: both resolve synchronously through their own
resolver and cache, not this run's Lookup (its nameservers, the preflight cache, the network-down
verdict, the run's deadline); checkdmarc does not stop an endless include chain at the limit
either, and pyspf evaluates one client address, its DNS set through a module-wide hook.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from newsletter.preflight.faults import Fault
from newsletter.preflight.lookup import Lookup

LOOKUP_LIMIT = 10
VOID_LIMIT = 2
MX_LIMIT = 10
_MECHANISMS = {"all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists"}
_COSTLY = {"include", "a", "mx", "ptr", "exists"}
_TERM = re.compile(r"([+\-~?]?)([a-z][a-z0-9_.-]*)(?:([:=])(.*?))?(/\d+(?://\d+)?|//\d+)?$", re.I)
_FIX_LOOKUPS = "replace includes with ip4:/ip6: ranges or drop unused ones"


class SpfError(Exception):
    """The record cannot be evaluated: receivers would treat it as permerror."""


class LimitError(SpfError):
    """A limit of RFC 7208 4.6.4 was passed: the message says which, where, and the fix."""


@dataclass
class _Walk:
    lookups: int = 0
    voids: list[str] = field(default_factory=list)  # the terms whose lookup found nothing

    def count(self, term: str, domain: str) -> None:
        self.lookups += 1
        if self.lookups > LOOKUP_LIMIT:
            raise LimitError(
                f"needs more than {LOOKUP_LIMIT} DNS lookups (the {LOOKUP_LIMIT + 1}th is {term!r} "
                f"in {domain}'s record); receivers stop there and treat it as broken "
                f"(permerror, RFC 7208 4.6.4); {_FIX_LOOKUPS}"
            )

    def void(self, term: str, domain: str) -> None:
        self.voids.append(f"{term!r} in {domain}")
        if len(self.voids) > VOID_LIMIT:
            raise LimitError(
                f"makes more than {VOID_LIMIT} void DNS lookups (names with no record: "
                f"{', '.join(self.voids)}); receivers treat it as broken (permerror, RFC 7208 "
                "4.6.4); drop the terms that name hosts which no longer exist"
            )


async def check_spf(lookup: Lookup, domain: str) -> list[Fault]:
    fix = f'publish one TXT record at {domain}, e.g. "v=spf1 mx -all" (list your sending hosts)'
    records = await _spf_records(lookup, domain)
    if not records:
        return [Fault("spf", f"{domain} has no SPF record: {fix}", "auth")]
    try:
        ending = await _evaluate(lookup, domain, _Walk(), ())
    except LimitError as exc:
        return [Fault("spf", f"the SPF record of {domain} {exc}", "auth")]
    except SpfError as exc:
        return [Fault("spf", f"the SPF record of {domain} is broken: {exc}", "auth")]
    if ending == "+":
        return [
            Fault(
                "spf",
                f"the SPF record of {domain} ends in +all: it lets anyone send as {domain}; "
                "end it with -all (or ~all)",
            )
        ]
    if ending is None or ending == "?":
        shown = "?all" if ending == "?" else "no all"
        return [
            Fault(
                "spf",
                f"the SPF record of {domain} ends in {shown}: mail from any host gets a neutral "
                "result; end it with -all (or ~all)",
                "warning",
            )
        ]
    return []


async def _spf_records(lookup: Lookup, domain: str) -> list[str]:
    records = await lookup.txt(domain)
    return [r for r in records if r.lower() == "v=spf1" or r.lower().startswith("v=spf1 ")]


async def _evaluate(lookup: Lookup, domain: str, walk: _Walk, path: tuple[str, ...]) -> str | None:
    """Walk one record and what it includes; return the qualifier of the `all` that ends the
    policy (this record's, or its redirect's), if any. `path`: the names above this one."""
    name = domain.lower().rstrip(".")
    if name in path:
        way = " → ".join((*path[path.index(name) :], name))
        raise SpfError(f"{domain} includes itself (a loop: {way})")
    path = (*path, name)
    records = await _spf_records(lookup, domain)
    if not records:
        raise SpfError(f"{domain} has no SPF record (an include or redirect points at it)")
    if len(records) > 1:
        raise SpfError(f"{domain} has {len(records)} SPF records; there must be exactly one")
    ending: str | None = None
    redirect: str | None = None
    for term in records[0].split()[1:]:
        match = _TERM.match(term)
        if match is None:
            raise SpfError(f"{term!r} is not an SPF term")
        qualifier, kind, separator, argument, cidr = match.groups()
        kind = kind.lower()
        if separator == "=":
            if qualifier:
                raise SpfError(f"{term!r}: a modifier takes no qualifier")
            if kind == "redirect":
                redirect = argument
            continue
        if kind not in _MECHANISMS:
            raise SpfError(f"{term!r} is not an SPF mechanism")
        if kind in ("include", "exists") and not argument:
            raise SpfError(f"{term!r} needs a domain")
        if kind in ("ip4", "ip6"):
            _check_network(term, (argument or "") + (cidr or ""), 4 if kind == "ip4" else 6)
        if kind in _COSTLY:
            walk.count(term, domain)
            await _resolve(lookup, kind, argument or domain, term, domain, walk, path)
        if kind == "all" and ending is None:
            ending = qualifier or "+"
    if redirect is not None and ending is None:  # RFC 7208 6.1: an `all` makes it unused
        walk.count(f"redirect={redirect}", domain)
        if "%" in redirect:
            return "-"  # the target depends on the sender: assume it ends the policy
        return await _evaluate(lookup, redirect, walk, path)
    return ending


async def _resolve(
    lookup: Lookup,
    kind: str,
    target: str,
    term: str,
    domain: str,
    walk: _Walk,
    path: tuple[str, ...],
) -> None:
    """The lookup a costly term makes, as far as it does not depend on the sending host."""
    if "%" in target or kind == "ptr":
        return  # a macro, or ptr: the name depends on the sending host
    if kind == "include":
        await _evaluate(lookup, target, walk, path)  # its `all` ends only its own policy
    elif kind == "mx":
        hosts = await lookup.mx(target)
        if not hosts:
            walk.void(term, domain)
        elif len(hosts) > MX_LIMIT:
            raise LimitError(
                f"names {target} in {term!r}, which has {len(hosts)} MX hosts, over the limit "
                f"of {MX_LIMIT} (RFC 7208 4.6.4): receivers treat it as broken (permerror); "
                "list the sending hosts with ip4:/ip6: instead"
            )
    elif not await lookup.addresses(target):  # a, exists
        walk.void(term, domain)


def _check_network(term: str, argument: str | None, version: int) -> None:
    try:
        network = ipaddress.ip_network(argument or "", strict=False)
    except ValueError:
        raise SpfError(f"{term!r}: {argument!r} is not an IPv{version} address or range") from None
    if network.version != version:
        raise SpfError(f"{term!r}: {argument!r} is not an IPv{version} address or range")
