"""Provider webhook events already applied: a provider's event id in, first time or not out.

Providers retry until they get a 2xx, and anyone who once saw a signed request can send it again
within the timestamp tolerance: each event id is claimed in one statement (an insert that does
nothing on conflict), so two deliveries of one event at the same instant, on one machine or
many, apply it once. The caller claims inside the transaction that applies the event
(webhooks/common.py), so a claim never outlives an application that did not happen. Times are
Unix seconds from the caller's clock, so a test can move it; ids older than the tolerance are
pruned (a replay that old is refused by its timestamp anyway).
"""

from __future__ import annotations

from newsletter.database.backend import Backend

# The row that keeps when each provider's last event came (no provider's event id is a lone
# "*": theirs are UUIDs and hashes); pruning leaves it.
LAST_SEEN = "*"


class WebhookEvents:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def claim(self, provider: str, event_id: str, now: float) -> bool:
        """Record `event_id` of `provider` as seen at `now`; False if it was seen before."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO webhook_events (provider, event_id, seen_at) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (provider, event_id, now),
            )
            self.backend.run(
                "INSERT INTO webhook_events (provider, event_id, seen_at) VALUES (?, ?, ?)"
                " ON CONFLICT (provider, event_id) DO UPDATE SET seen_at = excluded.seen_at",
                (provider, LAST_SEEN, now),
            )
        return added == 1

    def prune(self, before: float) -> int:
        """Delete the ids seen before `before` (Unix seconds); how many went. Each provider's
        LAST_SEEN row stays: the doctor's proof that its webhook ever reached us."""
        with self.backend.transaction():
            return self.backend.run(
                "DELETE FROM webhook_events WHERE seen_at < ? AND event_id <> ?",
                (before, LAST_SEEN),
            )

    def last_seen(self, provider: str) -> float | None:
        """When a signed event of `provider` was last claimed (Unix seconds); None: never."""
        found = self.backend.fetch(
            "SELECT seen_at FROM webhook_events WHERE provider = ? AND event_id = ?",
            (provider, LAST_SEEN),
        )
        return float(found[0][0]) if found else None
