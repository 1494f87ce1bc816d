"""People erased on request (GDPR Art. 17): a keyed hash of each address in, whether an address
is one of them out.

The hash is an HMAC of the address key under a random key of its own (signup/forgetting.py
makes it and hashes with it), kept here wrapped (encrypted) under each secret in use, never in
the clear: the table alone, as a backup or a leak shows it, tells nobody which addresses it
holds. `forget_keys` holds the wrapped key by the id of the secret that wraps it, so it
survives a rotation of NEWSLETTER_SECRET.

A person's delivery rows and suppressions are the deliveries and suppressions stores' to erase
(`Deliveries.forget`, `Suppressions.drop_address`); signup/forgetting.py does it all in one step.
"""

from __future__ import annotations

from newsletter.database.backend import Backend
from newsletter.database.records import now


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
