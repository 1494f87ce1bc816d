"""`newsletter doctor`'s one call: settings in, every check's Diagnosis out, in a fixed order
(the secret first, the disk last). The network checks run at once, each within its own timeout
([check] timeout, [smtp] timeout, [bounces] timeout); nothing is sent, written or moved, and
DNS answers are asked afresh (the preflight's cache is neither read nor written)."""

from __future__ import annotations

import asyncio

from newsletter.config.settings import Settings
from newsletter.doctor.diagnosis import Diagnosis
from newsletter.doctor.local import (
    check_database,
    check_disk,
    check_secret,
    check_signup,
    check_webhook,
    webhook_keyed,
)
from newsletter.doctor.network import (
    check_base_url,
    check_dns,
    check_mailbox,
    check_relays,
    check_serve,
)
from newsletter.preflight.lookup import Lookup
from newsletter.state.statecache import Cache

MIN_FREE = 1 << 30  # bytes the state folder's file system should have free (`--min-free`)


def examine(settings: Settings, *, min_free: int = MIN_FREE) -> list[Diagnosis]:
    return asyncio.run(_examine(settings, min_free))


def examine_relays(settings: Settings) -> list[Diagnosis]:
    """The relays (each answers, takes our credentials; nothing sent) and, when the return path
    is a provider's, its webhook: what `check --online` adds once there are several relays or a
    provider's return path (one relay on our own return path is the doctor's to check)."""
    if not settings.smtp.relays and not settings.webhooks.relay:
        return []

    async def both() -> list[Diagnosis]:
        relays = await check_relays(settings)
        return [*relays, *await asyncio.to_thread(check_webhook, settings)]

    return asyncio.run(both())


async def _examine(settings: Settings, min_free: int) -> list[Diagnosis]:
    lookup = Lookup(settings.check, Cache(None))
    serve, smtp, dns, mailbox, database, hooks = await asyncio.gather(
        check_serve(settings, lookup),
        check_relays(settings, production=True, lookup=lookup),
        check_dns(settings, lookup),
        asyncio.to_thread(check_mailbox, settings, webhook_keyed(settings)),
        asyncio.to_thread(check_database, settings),
        asyncio.to_thread(check_webhook, settings),
    )
    return [
        check_secret(settings),
        check_base_url(settings),
        serve,
        check_signup(settings),
        *smtp,
        *hooks,
        *dns,
        *database,
        mailbox,
        check_disk(settings, min_free),
    ]
