"""People erased on request (GDPR Art. 17): a keyed hash of each address in, whether an address
is one of them out; and the delivery log's rows of a person scrubbed of their address.

The hash is an HMAC of the address key under a random key of its own (signup/forgetting.py
makes it and hashes with it), kept here wrapped (encrypted) under each secret in use, never in
the clear: the table alone, as a backup or a leak shows it, tells nobody which addresses it
holds. `forget_keys` holds the wrapped key by the id of the secret that wraps it, so it
survives a rotation of NEWSLETTER_SECRET.

`scrub_deliveries` and `drop_suppressions` reach into the delivery log's own tables (issue 19's
deliveries and suppressions stores will own these statements, and the two reads of a person's
rows beside them): the rows stay, so every send's counts still add up, but the address and name
leave them; rows still waiting become `skipped` (they must never go out now).
"""

from __future__ import annotations

from newsletter.outbox.backend import Backend
from newsletter.outbox.records import now

FORGOTTEN_REPLY = "forgotten: erased on request"
# The rows of a send that may still go out; `sending` is left to the run that holds it.
_WAITING = "('pending', 'deferred', 'unknown', 'failed')"


class Forgotten:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def add(self, digest: str) -> bool:
        """Keep `digest`; False if it was kept already."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO forgotten (digest, created_at) VALUES (?, ?)"
                " ON CONFLICT (digest) DO NOTHING",
                (digest, now()),
            )
        return added == 1

    def remove(self, digest: str) -> bool:
        with self.backend.transaction():
            return self.backend.run("DELETE FROM forgotten WHERE digest = ?", (digest,)) == 1

    def contains(self, digest: str) -> bool:
        return bool(self.backend.fetch("SELECT 1 FROM forgotten WHERE digest = ?", (digest,)))

    def when(self, digest: str) -> str | None:
        rows = self.backend.fetch("SELECT created_at FROM forgotten WHERE digest = ?", (digest,))
        return str(rows[0][0]) if rows else None

    def digests(self) -> frozenset[str]:
        """Every digest kept: few (one per erasure), read once per send."""
        return frozenset(str(r[0]) for r in self.backend.fetch("SELECT digest FROM forgotten"))

    def count(self) -> int:
        return int(self.backend.fetch("SELECT count(*) FROM forgotten")[0][0])

    # -- the hashing key, wrapped under each secret ---------------------------------------------

    def wrapped_keys(self) -> dict[str, str]:
        """Key id of a secret -> the hashing key wrapped under it."""
        rows = self.backend.fetch("SELECT key_id, wrapped FROM forget_keys")
        return {str(k): str(w) for k, w in rows}

    def keep_key(self, key_id: str, wrapped: str) -> bool:
        """Keep the hashing key wrapped under the secret `key_id` names, unless one is kept for
        it already (two processes making the first key at once: the first one wins)."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO forget_keys (key_id, wrapped, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key_id) DO NOTHING",
                (key_id, wrapped, now()),
            )
        return added == 1

    # -- the delivery log ----------------------------------------------------------------------

    def scrub_deliveries(self, key: str, digest: str) -> int:
        """The person's delivery rows without their address or name (the recipient becomes
        `forgotten:DIGEST:ROW`, unique as the key was); rows that could still go out become
        `skipped`. How many."""
        marker = f"forgotten:{digest[:16]}:"
        stamp = now()
        with self.backend.transaction():
            self.backend.run(
                "UPDATE deliveries SET state = 'skipped', smtp_code = NULL, smtp_reply = ?,"
                f" owner = NULL, updated_at = ? WHERE recipient = ? AND state IN {_WAITING}",
                (FORGOTTEN_REPLY, stamp, key),
            )
            return self.backend.run(
                "UPDATE deliveries SET recipient = ? || CAST(id AS TEXT), envelope = '', name = '',"
                " updated_at = ?"
                " WHERE recipient = ?",
                (marker, stamp, key),
            )

    def deliveries(self, key: str) -> list[tuple[int, str, str, str | None, str]]:
        """(issue, list, state, sent_at, updated_at) of every delivery row of the person."""
        rows = self.backend.fetch(
            "SELECT issue, list, state, sent_at, updated_at FROM deliveries WHERE recipient = ?"
            " ORDER BY issue, list",
            (key,),
        )
        return [(int(i), str(li), str(st), s, str(u)) for i, li, st, s, u in rows]

    def suppressions(self, key: str) -> list[tuple[str, str, str]]:
        """(list, source, created_at) of every suppression of the person."""
        rows = self.backend.fetch(
            "SELECT list, source, created_at FROM suppressions WHERE address = ? ORDER BY list",
            (key,),
        )
        return [(str(li), str(so), str(c)) for li, so, c in rows]

    def drop_suppressions(self, key: str) -> int:
        """The person's suppressions: the digest stands in for them on every list."""
        with self.backend.transaction():
            return self.backend.run("DELETE FROM suppressions WHERE address = ?", (key,))
