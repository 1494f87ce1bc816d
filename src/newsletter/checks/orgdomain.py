"""A host name in; its organizational domain out: the registrable part, by the public suffix list
(what DMARC's relaxed alignment compares)."""

from __future__ import annotations

from functools import cache

from publicsuffixlist import PublicSuffixList


def organizational_domain(domain: str) -> str:
    """news.example.org -> example.org; a name with no registrable part stays as it is."""
    name = domain.lower().rstrip(".")
    return _suffixes().privatesuffix(name) or name


@cache
def _suffixes() -> PublicSuffixList:
    # The list ships with the package: parsed once per process, with no network.
    return PublicSuffixList()
