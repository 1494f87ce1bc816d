"""A domain in, what is wrong with its SPF record out (RFC 7208), as Faults.

Checked: exactly one `v=spf1` record; every term known and well-formed; at most 10 terms that
cost a DNS lookup (include, a, mx, ptr, exists, redirect), counted through every include and
redirect, as receivers count them (past 10 SPF fails as a whole, "permerror"); every include
and redirect target has a record of its own; and the policy ends in `-all` or `~all`, never
`+all` (anyone may send as you) and never without an ending (a neutral result for everyone).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from newsletter.preflight.faults import Fault
from newsletter.preflight.lookup import Lookup

LOOKUP_LIMIT = 10
_MECHANISMS = {"all", "include", "a", "mx", "ptr", "ip4", "ip6", "exists"}
_COSTLY = {"include", "a", "mx", "ptr", "exists"}
_TERM = re.compile(r"([+\-~?]?)([a-z][a-z0-9_.-]*)(?:([:=])(.*?))?(/\d+(?://\d+)?|//\d+)?$", re.I)


class SpfError(Exception):
    """The record cannot be evaluated: receivers would treat it as permerror."""


@dataclass
class _Walk:
    lookups: int = 0
    seen: set[str] = field(default_factory=set)


async def check_spf(lookup: Lookup, domain: str) -> list[Fault]:
    fix = f'publish one TXT record at {domain}, e.g. "v=spf1 mx -all" (list your sending hosts)'
    records = await _spf_records(lookup, domain)
    if not records:
        return [Fault("spf", f"{domain} has no SPF record: {fix}", "auth")]
    walk = _Walk()
    try:
        ending = await _evaluate(lookup, domain, walk, top=True)
    except SpfError as exc:
        return [Fault("spf", f"the SPF record of {domain} is broken: {exc}", "auth")]
    faults = []
    if walk.lookups > LOOKUP_LIMIT:
        faults.append(
            Fault(
                "spf",
                f"the SPF record of {domain} needs {walk.lookups} DNS lookups, over the limit "
                f"of {LOOKUP_LIMIT}: receivers treat it as broken (permerror); replace includes "
                "with ip4:/ip6: ranges or drop unused ones",
                "auth",
            )
        )
    if ending == "+":
        faults.append(
            Fault(
                "spf",
                f"the SPF record of {domain} ends in +all: it lets anyone send as {domain}; "
                "end it with -all (or ~all)",
            )
        )
    elif ending in ("?", None):
        shown = "?all" if ending == "?" else "no all"
        faults.append(
            Fault(
                "spf",
                f"the SPF record of {domain} ends in {shown}: mail from any host gets a neutral "
                "result; end it with -all (or ~all)",
                "warning",
            )
        )
    return faults


async def _spf_records(lookup: Lookup, domain: str) -> list[str]:
    records = await lookup.txt(domain)
    return [r for r in records if r.lower() == "v=spf1" or r.lower().startswith("v=spf1 ")]


async def _evaluate(lookup: Lookup, domain: str, walk: _Walk, *, top: bool = False) -> str | None:
    """Walk one record (and what it includes); return the qualifier of its `all`, if any."""
    if domain.lower() in walk.seen:
        raise SpfError(f"{domain} includes itself (a loop)")
    walk.seen.add(domain.lower())
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
        qualifier, name, separator, argument, cidr = match.groups()
        name = name.lower()
        if separator == "=":
            if qualifier:
                raise SpfError(f"{term!r}: a modifier takes no qualifier")
            if name == "redirect":
                walk.lookups += 1
                redirect = argument
            continue
        if name not in _MECHANISMS:
            raise SpfError(f"{term!r} is not an SPF mechanism")
        if name in _COSTLY:
            walk.lookups += 1
        if name in ("include", "exists") and not argument:
            raise SpfError(f"{term!r} needs a domain")
        if name in ("ip4", "ip6"):
            _check_network(term, (argument or "") + (cidr or ""), 4 if name == "ip4" else 6)
        if name == "include" and "%" not in argument:
            await _evaluate(lookup, argument, walk)
        if name == "all":
            ending = qualifier or "+"
    if redirect is not None and ending is None and "%" not in redirect:
        return await _evaluate(lookup, redirect, walk, top=top)
    return ending if top else None


def _check_network(term: str, argument: str | None, version: int) -> None:
    try:
        network = ipaddress.ip_network(argument or "", strict=False)
    except ValueError:
        raise SpfError(f"{term!r}: {argument!r} is not an IPv{version} address or range") from None
    if network.version != version:
        raise SpfError(f"{term!r}: {argument!r} is not an IPv{version} address or range")
