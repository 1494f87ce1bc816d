"""Signing up as a stranger would, from a test: a challenge fetched and solved (the altcha
package's own solver), the form or the JSON posted; and the project's outbox read back."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
from altcha import Challenge, solve_challenge

from newsletter.database import open_database
from newsletter.database.consent import ConsentEvent
from newsletter.database.mailqueue import SiteMail, SiteMailQueue
from newsletter.database.roster import Membership

# What a signup project sets: the main list takes signups, a cheap proof of work, no DNS (the
# tests that look at the domain check start a DNS server of their own), and rate limits that a
# test's own posts do not meet (the tests of the limits set them low).
SIGNUP_ENV = {
    "NEWSLETTER_LISTS__MAIN__SIGNUP": "true",
    "NEWSLETTER_SIGNUP__WORK_COST": "100",
    "NEWSLETTER_SIGNUP__CHECK_DNS": "false",
    "NEWSLETTER_SIGNUP__PER_CLIENT_BURST": "1000",
    "NEWSLETTER_SIGNUP__SITE_BURST": "10000",
}


def solved(base: str, client: httpx.Client | None = None) -> str:
    """A payload for a fresh challenge of the site at `base`, solved."""
    http = client or httpx
    made = http.get(f"{base}/signup/challenge").json()
    solution = solve_challenge(Challenge.from_dict(made))
    assert solution is not None
    payload = {"challenge": made, "solution": solution.to_dict()}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def post_signup(
    base: str,
    email: str,
    *,
    work: str | None = "solve",
    headers: dict[str, str] | None = None,
    client: httpx.Client | None = None,
    **fields: str,
) -> httpx.Response:
    http = client or httpx
    data = {"email": email, "list": "main", **fields}
    if work == "solve":
        data["altcha"] = solved(base, client)
    elif work is not None:
        data["altcha"] = work
    return http.post(f"{base}/signup", data=data, headers=headers or {})


def post_json(base: str, body: Any, *, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{base}/api/signup", json=body, headers=headers or {})


def queued(target: Path | str) -> list[SiteMail]:
    with open_database(target) as database:
        backend = database.backend
        ids = [r[0] for r in backend.fetch("SELECT id FROM site_mail ORDER BY id")]
        queue = SiteMailQueue(backend)
        return [m for m in (queue.get(i) for i in ids) if m is not None]


def member(target: Path | str, address: str, list_name: str = "main") -> Membership | None:
    with open_database(target) as database:
        return database.roster.get(list_name, address)


def ledger(target: Path | str, address: str) -> list[ConsentEvent]:
    with open_database(target) as database:
        return database.consent.of(address)
