"""The proof of work: challenges the `altcha` package's own solver solves are accepted once;
forged, altered, expired, replayed, wrong and malformed payloads are refused, the costly key
derivation running only for a genuine, fresh, first-posted challenge."""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

import pytest
from altcha import Challenge, Payload, solve_challenge

from newsletter.signup import challenge as module
from newsletter.signup.challenge import (
    KEY_PREFIX,
    MAX_PAYLOAD,
    ProofOfWork,
    ProofVerdict,
    Replays,
    challenge_key,
)

SECRET = b"signup-tests-secret-0123456789abcdef"
COST = 100  # the lowest the settings allow: the tests solve many challenges


def solved(pow_: ProofOfWork) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fresh challenge and its solution, found by the altcha package's reference solver."""
    made = pow_.challenge()
    solution = solve_challenge(Challenge.from_dict(made))
    assert solution is not None
    return made, solution.to_dict()


def encode(challenge: dict[str, Any], solution: dict[str, Any]) -> str:
    return base64.b64encode(
        json.dumps({"challenge": challenge, "solution": solution}).encode()
    ).decode()


@pytest.fixture
def pow_() -> ProofOfWork:
    return ProofOfWork(SECRET, cost=COST, expiry=600)


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the costly PBKDF2 derivations the verifier runs."""
    calls: list[int] = []
    real = module.derive_key_pbkdf2

    def counted(*args: Any) -> bytes:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(module, "derive_key_pbkdf2", counted)
    return calls


def test_a_challenge_is_altchas_v2_with_our_cost_and_expiry(pow_: ProofOfWork) -> None:
    made = pow_.challenge()
    params = made["parameters"]
    assert params["algorithm"] == "PBKDF2/SHA-256"
    assert (params["cost"], params["keyPrefix"], params["keyLength"]) == (COST, KEY_PREFIX, 32)
    assert abs(params["expiresAt"] - (time.time() + 600)) < 5
    assert len(made["signature"]) == 64
    assert pow_.challenge()["parameters"]["nonce"] != params["nonce"]
    # The HMAC key is derived from the secret, never the secret itself.
    assert challenge_key(SECRET) not in (SECRET, challenge_key(SECRET + b"x"))


def test_a_solved_challenge_is_accepted_once(pow_: ProofOfWork, derivations: list[int]) -> None:
    payload = encode(*solved(pow_))
    assert pow_.verify(payload).verdict is ProofVerdict.ACCEPTED
    assert pow_.verify(payload).verdict is ProofVerdict.REPLAYED
    assert len(derivations) == 1  # the replay was refused before any derivation


def test_the_payload_altchas_own_encoder_writes_is_accepted(pow_: ProofOfWork) -> None:
    made = pow_.challenge()
    challenge = Challenge.from_dict(made)
    solution = solve_challenge(challenge)
    assert solution is not None
    assert pow_.verify(Payload(challenge, solution).to_base64()).accepted


def test_a_wrong_solution_burns_the_challenge(pow_: ProofOfWork, derivations: list[int]) -> None:
    made, solution = solved(pow_)
    wrong = {**solution, "counter": solution["counter"] + 1}
    assert pow_.verify(encode(made, wrong)).verdict is ProofVerdict.WRONG
    # The right answer afterwards is too late: one attempt per challenge, so every derivation
    # on our side costs the sender a new challenge.
    assert pow_.verify(encode(made, solution)).verdict is ProofVerdict.REPLAYED
    assert len(derivations) == 1


def test_another_key_or_altered_parameters_are_forged(
    pow_: ProofOfWork, derivations: list[int]
) -> None:
    made, solution = solved(pow_)
    other = ProofOfWork(b"another-secret-0123456789abcdefgh", cost=COST, expiry=600)
    assert other.verify(encode(made, solution)).verdict is ProofVerdict.FORGED
    for change in (
        {"cost": 1},
        {"keyPrefix": ""},
        {"expiresAt": made["parameters"]["expiresAt"] + 1},
    ):
        altered = {**made, "parameters": {**made["parameters"], **change}}
        assert pow_.verify(encode(altered, solution)).verdict is ProofVerdict.FORGED, change
    unsigned = {"parameters": made["parameters"]}
    assert pow_.verify(encode(unsigned, solution)).verdict is ProofVerdict.FORGED
    assert derivations == []  # a forgery costs one HMAC, never a derivation
    assert len(pow_.replays) == 0  # and takes no room in the replay table


def test_an_expired_challenge_is_refused(derivations: list[int]) -> None:
    past = ProofOfWork(SECRET, cost=COST, expiry=60, clock=lambda: time.time() - 3600)
    payload = encode(*solved(past))
    assert ProofOfWork(SECRET, cost=COST, expiry=60).verify(payload).verdict is ProofVerdict.EXPIRED
    assert derivations == []


def _deep(depth: int) -> str:
    return base64.b64encode(("[" * depth + "]" * depth).encode()).decode()


@pytest.mark.parametrize(
    "payload",
    [
        None,
        42,
        b"bytes",
        "",
        "A" * (MAX_PAYLOAD + 1),
        "not base64 at all!",
        base64.b64encode(b"not json").decode(),
        base64.b64encode(b"[1, 2, 3]").decode(),
        base64.b64encode(b'{"challenge": {}, "solution": {}}').decode(),
        base64.b64encode(b'{"challenge": {"parameters": 5}, "solution": []}').decode(),
        _deep(1000),
    ],
)
def test_malformed_payloads_are_refused_without_a_traceback(
    pow_: ProofOfWork, payload: Any
) -> None:
    assert pow_.verify(payload).verdict is ProofVerdict.MALFORMED


@pytest.mark.parametrize(
    "change",
    [
        {"counter": "12"},
        {"counter": 1.5},
        {"counter": True},
        {"derivedKey": 5},
        {"counter": 2**40},
        {"counter": -1},
    ],
)
def test_a_solution_of_the_wrong_type_or_range_is_refused(
    pow_: ProofOfWork, change: dict[str, Any]
) -> None:
    made, solution = solved(pow_)
    verdict = pow_.verify(encode(made, {**solution, **change})).verdict
    assert verdict in (ProofVerdict.MALFORMED, ProofVerdict.WRONG)
    assert verdict is not ProofVerdict.ACCEPTED


def test_concurrent_posts_of_one_solution_accept_exactly_one(pow_: ProofOfWork) -> None:
    payload = encode(*solved(pow_))
    verdicts: list[ProofVerdict] = []
    start = threading.Barrier(16)

    def post() -> None:
        start.wait()
        verdicts.append(pow_.verify(payload).verdict)

    threads = [threading.Thread(target=post) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(verdicts) == sorted([ProofVerdict.ACCEPTED] + [ProofVerdict.REPLAYED] * 15)


def test_the_replay_table_is_bounded_and_refuses_rather_than_forgets() -> None:
    now = [1000.0]
    replays = Replays(limit=3, clock=lambda: now[0])
    assert [replays.claim(k, 1100.0) for k in "abc"] == [True, True, True]
    assert replays.claim("d", 1100.0) is None  # full: refused, "a" is not forgotten
    assert replays.claim("a", 1100.0) is False
    now[0] = 1101.0  # all three expired: their room is free again
    assert replays.claim("d", 1200.0) is True
    assert len(replays) == 1


def test_a_full_replay_table_makes_the_verdict_busy(pow_: ProofOfWork) -> None:
    busy = ProofOfWork(SECRET, cost=COST, expiry=600, replays=Replays(limit=0))
    assert busy.verify(encode(*solved(busy))).verdict is ProofVerdict.BUSY
