"""POST /webhooks/PROVIDER: providers' bounce and complaint events -> the bounce policy.

A provider answers only when its key is configured (404 otherwise, as for any unknown path).
The request is verified by the provider's module (webhooks/) before its body is parsed; a forged
or stale one is refused with a bare 401 or 400 and the reason goes to the server log only (a
503 when the fault is on our side, as an SES certificate that cannot be fetched now). A
verified request is applied on the process's one outbox connection (the same policy, rates and
suppressions as `newsletter bounces`) and answered 200, replays included: a provider retries
anything else, and a replay was already applied once.

Verification runs on worker threads of its own (WEBHOOK_THREADS, an anyio CapacityLimiter),
never on the pool the pages share: an SES post may wait on a certificate fetch (at most
`fetch`'s timeout), and a flood of them must not leave the archive without a thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import anyio.to_thread
from anyio import CapacityLimiter
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from newsletter.bounces.policy import Policy
from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.errors import ConfigError
from newsletter.links import WEBHOOK_PATH
from newsletter.web.listen import NO_STORE
from newsletter.web.site.connection import DatabaseThread
from newsletter.webhooks.common import Event, RefusedError, apply_events
from newsletter.webhooks.mailgun import NAME as MAILGUN
from newsletter.webhooks.mailgun import Mailgun, Tokens
from newsletter.webhooks.postmark import Postmark
from newsletter.webhooks.resend import Resend
from newsletter.webhooks.sendgrid import SendGrid
from newsletter.webhooks.ses import Fetch, Ses, fetch_https

log = logging.getLogger("newsletter.webhooks")
WEBHOOK_THREADS = 4  # posts verified at once; the others wait for a thread without holding one


class Reader(Protocol):
    def read(self, headers: Mapping[str, str], body: bytes, now: float) -> list[Event]: ...


def readers_for(settings: Settings, fetch: Fetch, tokens: Tokens) -> dict[str, Reader]:
    """The providers whose key or secret is set; a malformed one stops `serve` at start
    (ConfigError naming the variable), not at the provider's first event. `tokens` keeps
    Mailgun's signature tokens (webhooks/mailgun.py)."""
    tolerance = settings.webhooks.tolerance_seconds
    found: dict[str, Reader] = {}
    try:
        if settings.webhook_sendgrid_key is not None:
            key = settings.webhook_sendgrid_key.get_secret_value()
            found["sendgrid"] = SendGrid(key, tolerance)
        if settings.webhook_resend_secret is not None:
            secret = settings.webhook_resend_secret.get_secret_value()
            found["resend"] = Resend(secret, tolerance)
        if settings.webhook_mailgun_key is not None:
            key = settings.webhook_mailgun_key.get_secret_value()
            found["mailgun"] = Mailgun(key, tolerance, tokens)
        if settings.webhook_postmark_password is not None:
            password = settings.webhook_postmark_password.get_secret_value()
            found["postmark"] = Postmark(settings.webhooks.postmark_user, password)
        if settings.webhooks.ses_topics:
            found["ses"] = Ses(settings.webhooks.ses_topics, tolerance, fetch)
    except ValueError as exc:
        raise ConfigError(
            str(exc), hint="Copy the key or secret again from the provider's webhook settings."
        ) from None
    return found


class Webhooks:
    def __init__(
        self,
        settings: Settings,
        keys: Sequence[bytes],
        database: DatabaseThread,
        fetch: Fetch = fetch_https,
    ) -> None:
        self.settings = settings
        self.keys = tuple(keys)
        self.database = database
        self.readers = readers_for(settings, fetch, self._first_use)
        self.limiter = CapacityLimiter(WEBHOOK_THREADS)

    def _first_use(self, token: str, digest: str, stamp: float) -> bool:
        """Mailgun's token kept in the outbox (every process of the site sees it); called on
        the reader's worker thread, so it waits for the outbox's own."""
        expired = time.time() - self.settings.webhooks.tolerance_seconds
        return self.database.call(
            lambda ob: ob.webhook_tokens.first_use(MAILGUN, token, digest, stamp, expired)
        )

    def routes(self) -> list[Route]:
        return [Route(WEBHOOK_PATH, self.receive, methods=["POST"])]

    async def receive(self, request: Request) -> Response:
        provider: str = request.path_params["provider"]
        reader = self.readers.get(provider)
        if reader is None:
            raise HTTPException(404)
        body = await request.body()  # bounded by Guard (webhooks.common.MAX_BODY)
        now = time.time()
        try:
            # On a webhook thread: SES's first message of a certificate fetches it.
            events = await anyio.to_thread.run_sync(
                reader.read, request.headers, body, now, limiter=self.limiter
            )
        except RefusedError as exc:
            # A 5xx is ours to mend (a fetch that failed, fetches all busy): the provider retries.
            verdict = "refused" if exc.status < 500 else f"not taken now ({exc.status})"
            log.warning("webhook %s %s: %s", provider, verdict, exc.message)
            request.state.event = "webhook-refused"
            answer = "refused\n" if exc.status < 500 else "try again later\n"
            return PlainTextResponse(answer, exc.status, headers=NO_STORE)

        def apply(ob: Database) -> list[str]:
            policy = Policy(ob, self.settings.bounces, self.keys)
            return [d.verdict.value for d in apply_events(ob, policy, events, now)]

        verdicts = await self.database.run(apply)
        for event, verdict in zip(events, verdicts, strict=False):
            # The event id, never the address: the log is read by more people than the outbox.
            log.info("webhook %s event %s: %s, %s", provider, event.event_id, event.kind, verdict)
        request.state.event = "webhook"
        return PlainTextResponse("ok\n", headers=NO_STORE)
