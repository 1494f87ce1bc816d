"""The proof of work in front of every signup: a challenge out (ALTCHA's protocol, v2), a
solved payload in, and whether it is genuine, fresh, right and posted for the first time.

A challenge is PBKDF2/SHA-256 parameters (a random nonce and salt, `cost` iterations) and an
expiry, signed with an HMAC key derived from NEWSLETTER_SECRET. The browser tries counters until
the derived key starts with one zero byte (256 tries on average; web/site/static/
proof-of-work.js) and posts the payload back. `verify` runs the cheap checks first (size,
encoding, expiry, our signature), then claims the challenge in the Replays table, and only then
derives the one key: so every costly derivation on our side needs a challenge of its own, each
challenge is tried once (a second post of it, solved or not, is refused), and a forgery costs
one HMAC and takes no room in the table.

The checks themselves are the `altcha` package's (`verify_solution`, which calls our derivation
only after the signature holds); this module adds the bounds, the key, the replay table and one
verdict per reason, so that every endpoint can give the same answer whatever the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from altcha import (
    ChallengeParameters,
    Payload,
    create_challenge,
    derive_key_pbkdf2,
    verify_solution,
)

ALGORITHM = "PBKDF2/SHA-256"
KEY_PREFIX = "00"  # one zero byte: 1 in 256 counters solves it
MAX_PAYLOAD = 2048  # a genuine payload is ~600 characters of base64
MAX_REPLAYS = 200_000  # solved challenges remembered until they expire
_KEY_LABEL = b"newsletter signup proof-of-work v1"

Clock = Callable[[], float]


class ProofVerdict(StrEnum):
    """Why a payload was accepted or not (for logs and tests; visitors all see one answer)."""

    ACCEPTED = "accepted"
    MALFORMED = "malformed"  # not a payload at all (size, base64, JSON, fields)
    FORGED = "forged"  # our signature does not match (another key, altered parameters)
    EXPIRED = "expired"
    REPLAYED = "replayed"  # this challenge was already posted
    WRONG = "wrong"  # genuine challenge, wrong solution
    BUSY = "busy"  # the replay table is full: refused rather than forgotten


def challenge_key(secret: bytes) -> bytes:
    """The HMAC key for challenges: derived from the secret, never the secret itself, so a
    challenge can never be mistaken for (or help forge) an unsubscribe token."""
    return hmac.digest(secret, _KEY_LABEL, hashlib.sha256)


class Replays:
    """Challenges already posted, each kept until it expires: one use per challenge, in memory
    that is bounded (at most `limit` entries; when full, new claims are refused, never an old
    one forgotten, which would let it be posted again). Thread-safe: requests run on threads."""

    def __init__(self, limit: int = MAX_REPLAYS, clock: Clock = time.time) -> None:
        self._limit = limit
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._expiry: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def claim(self, key: str, expires_at: float) -> bool | None:
        """True the first time `key` is claimed, False after; None when the table is full."""
        with self._lock:
            now = self._clock()
            while self._expiry and self._expiry[0][0] < now:
                _, old = heapq.heappop(self._expiry)
                self._seen.pop(old, None)
            if key in self._seen:
                return False
            if len(self._seen) >= self._limit:
                return None
            self._seen[key] = expires_at
            heapq.heappush(self._expiry, (expires_at, key))
            return True

    def __len__(self) -> int:
        return len(self._seen)


@dataclass(frozen=True)
class ProofCheck:
    verdict: ProofVerdict

    @property
    def accepted(self) -> bool:
        return self.verdict is ProofVerdict.ACCEPTED


class ProofOfWork:
    """Challenges made and verified with one key; `cost` PBKDF2 iterations per attempt;
    `expiry` seconds a challenge may take to come back."""

    def __init__(
        self,
        secret: bytes,
        *,
        cost: int,
        expiry: float,
        replays: Replays | None = None,
        clock: Clock = time.time,
    ) -> None:
        self._key = challenge_key(secret)
        self.cost = cost
        self.expiry = expiry
        self._clock = clock
        self.replays = replays if replays is not None else Replays(clock=clock)

    def challenge(self) -> dict[str, Any]:
        """A new challenge as the JSON the browser solves."""
        made = create_challenge(
            ALGORITHM,
            self.cost,
            key_prefix=KEY_PREFIX,
            expires_at=int(self._clock() + self.expiry),
            hmac_secret=self._key,
        )
        result: dict[str, Any] = made.to_dict()
        return result

    def verify(self, payload: object) -> ProofCheck:
        """The verdict on a posted payload (the form field's value, as sent)."""
        parsed = _parse(payload)
        if parsed is None:
            return ProofCheck(ProofVerdict.MALFORMED)
        signature = parsed.challenge.signature
        expires_at = parsed.challenge.parameters.expires_at
        if not isinstance(signature, str) or not isinstance(expires_at, int):
            return ProofCheck(ProofVerdict.FORGED)  # every challenge we make has both
        if expires_at < self._clock():
            return ProofCheck(ProofVerdict.EXPIRED)

        def derive(parameters: ChallengeParameters, salt: bytes, password: bytes) -> bytes:
            # altcha calls this only once the expiry and our signature are checked: the claim
            # sits between those cheap checks and the one costly derivation.
            claimed = self.replays.claim(signature, float(expires_at))
            if not claimed:
                raise _RefusedError(ProofVerdict.BUSY if claimed is None else ProofVerdict.REPLAYED)
            return derive_key_pbkdf2(parameters, salt, password)

        try:
            checked = verify_solution(parsed, self._key, derive)
        except _RefusedError as refused:
            return ProofCheck(refused.verdict)
        except (ValueError, TypeError, RecursionError):
            return ProofCheck(ProofVerdict.MALFORMED)
        if checked.expired:
            return ProofCheck(ProofVerdict.EXPIRED)
        if checked.invalid_signature:
            return ProofCheck(ProofVerdict.FORGED)
        return ProofCheck(ProofVerdict.ACCEPTED if checked.verified else ProofVerdict.WRONG)


class _RefusedError(Exception):
    def __init__(self, verdict: ProofVerdict) -> None:
        super().__init__(verdict.value)
        self.verdict = verdict


def _parse(payload: object) -> Payload | None:
    """The payload if it is one: bounded base64 of a JSON object with the expected fields."""
    if not isinstance(payload, str) or not payload or len(payload) > MAX_PAYLOAD:
        return None
    try:
        data = json.loads(base64.b64decode(payload, validate=True))
        parsed = Payload.from_dict(data)
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    params, solution = parsed.challenge.parameters, parsed.solution
    texts = (params.algorithm, params.nonce, params.salt, params.key_prefix, solution.derived_key)
    numbers = (params.cost, params.key_length, solution.counter)
    if not all(isinstance(t, str) for t in texts):
        return None
    if not all(type(n) is int for n in numbers):
        return None
    return parsed
