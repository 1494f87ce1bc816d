"""Forgetting a person (GDPR Art. 17): an address in; their data erased, a keyed hash kept so
they are never mailed again, and what was kept, out. And the test every way in makes of an
address: was it forgotten?

The hash is HMAC-SHA256 of the address key under a random hashing key made at the first
erasure. The outbox keeps that key only wrapped (AES-SIV) under a key derived from each secret
in use (outbox/forgotten.py), so the table of hashes alone identifies nobody, and a rotation of
NEWSLETTER_SECRET keeps them working: a process that finds the key wrapped only under a secret
now in NEWSLETTER_SECRET_PREVIOUS wraps it under the new one too.

Erasing takes, in one transaction: the person's rows on every list (subscribers), their consent
events, the claim of their mailbox, their site mail, their suppressions (the hash stands in for
them), their click events, the bounce reports held about them (and the detail of those
recorded), and their address, name and SMTP reply out of the delivery log's rows (the rows
stay, so the sends' counts add up; rows still waiting become `skipped`). Kept: the hash, and
those scrubbed rows. Then the backend settles: on SQLite the WAL is checkpointed and truncated
(every connection has secure_delete on), so the erased rows are not left in the file's bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag

from newsletter.database.backend import Backend
from newsletter.database.bounces import Bounces
from newsletter.database.claims import ConfirmationClaims
from newsletter.database.clicks import Clicks
from newsletter.database.consent import ConsentLedger
from newsletter.database.deliveries import Deliveries
from newsletter.database.enrolments import Enrolments
from newsletter.database.forgotten import Forgotten
from newsletter.database.mailqueue import SiteMailQueue
from newsletter.database.roster import Roster
from newsletter.database.suppressions import Suppressions
from newsletter.errors import ConfigError
from newsletter.mail.tokens import SigningKey, b64, key_id, siv_box, unb64
from newsletter.signup.pending import mailbox_key

_WRAP_LABEL = b"newsletter forgotten-address key wrap v1"
_DIGEST_LABEL = b"newsletter forgotten address v1\n"


def _wrap(secret: bytes, hashing_key: bytes) -> str:
    kid = key_id(secret)
    return b64(siv_box(secret, _WRAP_LABEL).encrypt(hashing_key, [kid.encode()]))


def hashing_key(backend: Backend, key: SigningKey, *, create: bool = False) -> bytes | None:
    """The key forgotten addresses are hashed with; None when nobody was forgotten yet (and
    `create` is False). ConfigError when it is wrapped only under secrets this process lacks:
    nobody may be mailed then, as anyone might be a person who asked to be forgotten."""
    store = Forgotten(backend)
    wrapped = store.wrapped_keys()
    current = key_id(key.secret)
    for secret in key.verifying:
        kid = key_id(secret)
        if kid not in wrapped:
            continue
        try:
            found = siv_box(secret, _WRAP_LABEL).decrypt(unb64(wrapped[kid]), [kid.encode()])
        except (InvalidTag, ValueError):
            continue
        if kid != current and not key.ephemeral:
            store.keep_key(current, _wrap(key.secret, found))  # a rotation: wrap it anew
        return found
    if wrapped:
        raise ConfigError(
            "the outbox holds people erased on request, and their hashing key is wrapped under a"
            " secret this process does not have",
            hint="Set NEWSLETTER_SECRET as the other commands have it, and keep earlier values"
            " in NEWSLETTER_SECRET_PREVIOUS; nothing is sent until they can be told apart.",
        )
    if not create:
        return None
    if key.ephemeral:
        raise ConfigError(
            "forgetting someone needs NEWSLETTER_SECRET: the hash that keeps them from being"
            " mailed again is made under it",
            hint="Set NEWSLETTER_SECRET as `send` and `serve` have it.",
        )
    store.keep_key(current, _wrap(key.secret, secrets.token_bytes(32)))
    return hashing_key(backend, key)  # the first one kept, if another process raced us


def digest(hashing: bytes, address_key: str) -> str:
    """The keyed hash kept for a forgotten address key."""
    return hmac.digest(hashing, _DIGEST_LABEL + address_key.encode(), hashlib.sha256).hex()


def forgotten_test(backend: Backend, key: SigningKey) -> Callable[[str], bool]:
    """address key -> whether that person was forgotten: the digests read once (they are few),
    one HMAC per question only when there are any."""
    store = Forgotten(backend)
    digests = store.digests()
    if not digests:
        return lambda _: False
    hashing = hashing_key(backend, key)
    if hashing is None:  # digests without a key: nothing can be told apart
        raise ConfigError(
            "the outbox holds people erased on request but not the key to recognise them",
            hint="Restore the outbox's forget_keys table from a backup.",
        )
    return lambda address_key: digest(hashing, address_key) in digests


@dataclass(frozen=True)
class Erasure:
    """What forgetting one person did: what was erased, and what was kept."""

    digest: str
    already: bool  # the hash was kept already (forgotten before)
    memberships: int
    consent_events: int
    site_mail: int
    suppressions: int
    claims: int
    clicks: int  # click events of their rows (per-reader tracking)
    bounce_reports: int  # held ones deleted, recorded ones without their detail
    deliveries: int  # delivery rows scrubbed of the address (kept, without it)
    settled: bool = True  # the deleted data is gone from disk too (SQLite: the WAL truncated)
    enrolments: int = 0  # places in welcome sequences deleted


def forget(backend: Backend, key: SigningKey, address_key: str) -> Erasure:
    """Erase everything the outbox holds about the person at `address_key` and keep the hash
    that keeps them from being mailed again; in one transaction."""
    hashing = hashing_key(backend, key, create=True)
    assert hashing is not None
    kept = digest(hashing, address_key)
    with backend.transaction():
        added = Forgotten(backend).add(kept)
        memberships = Roster(backend).erase(address_key)
        enrolments = Enrolments(backend).erase(address_key)
        events = ConsentLedger(backend).erase(address_key)
        mail = SiteMailQueue(backend).erase(address_key)
        suppressions = Suppressions(backend).drop_address(address_key)
        # Before the rows lose the address: their clicks are found through it.
        clicks = Clicks(backend).forget_reader(address_key)
        bounces = Bounces(backend).forget_reader(address_key)
        deliveries = Deliveries(backend).forget(address_key, kept)
        try:
            mailbox = mailbox_key(address_key)
        except ValueError:
            claims = 0
        else:
            claims = ConfirmationClaims(backend).erase(mailbox)
    # After the commit: until a checkpoint the WAL still holds the pages as they were.
    settled = backend.settle()
    return Erasure(
        kept,
        not added,
        memberships,
        events,
        mail,
        suppressions,
        claims,
        clicks,
        bounces,
        deliveries,
        settled,
        enrolments,
    )


def unforget(backend: Backend, key: SigningKey, address_key: str) -> bool:
    """Lift an erasure's hash (the person asked to come back); whether there was one."""
    hashing = hashing_key(backend, key)
    if hashing is None:
        return False
    return Forgotten(backend).remove(digest(hashing, address_key))
