"""Provider signature tokens: a token and the digest of the request it signed in, whether that
request may be read out.

Mailgun signs only a timestamp and a random token, never the event, so a signature captured
from one request verifies over any body: Mailgun's own advice is to refuse a token seen before.
Each token is kept with the SHA-256 of the one body it came with, in one statement (an insert
that does nothing on conflict), so two processes, on one machine or many, agree on which body
it belongs to: the same body again (the provider's retry, or a replay) goes on to the event id's
check, any other body is refused. A token is kept an hour past the tolerance (KEPT_PAST): the
timestamp is checked on the clock the request was received by, the expiry here on a later
reading (a thread's wait, another process), so a token dropped the moment it left the tolerance
would be new again to a replay checked just inside it. By then the timestamp alone refuses it.
"""

from __future__ import annotations

from newsletter.database.backend import Backend

# Seconds a token outlives the tolerance: far more than a request waits between its time check
# and this store, however loaded the machine.
KEPT_PAST = 3600.0


class WebhookTokens:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def first_use(
        self, provider: str, token: str, digest: str, stamp: float, expired: float
    ) -> bool:
        """Keep `token` of `provider` (signed at `stamp`, Unix seconds) for the body of SHA-256
        `digest`; whether it was new, or kept for this same body. Tokens signed KEPT_PAST
        before `expired` (the oldest timestamp the tolerance lets in) are dropped first."""
        with self.backend.transaction():
            self.backend.run("DELETE FROM webhook_tokens WHERE stamp < ?", (expired - KEPT_PAST,))
            self.backend.run(
                "INSERT INTO webhook_tokens (provider, token, digest, stamp) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (provider, token, digest, stamp),
            )
            kept = self.backend.fetch(
                "SELECT digest FROM webhook_tokens WHERE provider = ? AND token = ?",
                (provider, token),
            )
        return bool(kept) and str(kept[0][0]) == digest
