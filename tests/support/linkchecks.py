"""One LinkChecker run over some URLs, with a [check] table made of keyword arguments."""

from __future__ import annotations

import asyncio

from newsletter.config.settings import CheckSettings, Settings
from newsletter.preflight.linkcheck import LinkChecker, LinkResult
from newsletter.preflight.lookup import Lookup
from newsletter.preflight.run import checking_tls_context
from newsletter.state.statecache import Cache


def check(
    urls: list[str],
    cache: Cache | None = None,
    lookup: Lookup | None = None,
    deadline: float | None = None,
    **config: object,
) -> tuple[dict[str, LinkResult], LinkChecker]:
    """`deadline`: seconds from now the run may take. The test servers are on 127.0.0.1: the
    link check reaches it only with `allow_private` (true unless a test says otherwise)."""
    values = {"timeout": 5.0, "allow_private": True, **config}
    settings = Settings(check=CheckSettings.model_validate(values))
    cache = cache or Cache(None)
    checker = LinkChecker(
        settings.check,
        cache,
        lambda: checking_tls_context(settings),
        lookup or Lookup(settings.check, cache),
    )

    async def run() -> dict[str, LinkResult]:
        end = None if deadline is None else asyncio.get_running_loop().time() + deadline
        return await checker.check(urls, end)

    return asyncio.run(run()), checker
