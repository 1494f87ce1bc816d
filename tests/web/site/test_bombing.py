"""A subscription-bombing run against `newsletter serve`, then the worker sends what was queued
into a real SMTP server: the same victim from many addresses at once (their +tags and dots
varied), many addresses from one client, posts without a solved challenge, and the JSON
endpoint. At most one mail reaches any mailbox, and none goes out without a solved challenge."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from newsletter.signup.pending import mailbox_key
from support.sendcli import environment, newsletter
from support.signups import SIGNUP_ENV, post_json, post_signup, queued, solved
from support.site import running_service
from support.smtp import FaultyHandler, start

pytestmark = pytest.mark.slow

VICTIM = [
    "victim@gmail.com",
    "Victim+1@gmail.com",
    "v.i.c.t.i.m+x@googlemail.com",
    "VICTIM@gmail.com",
]


def _from(ip: str) -> dict[str, str]:
    return {"x-forwarded-for": ip}  # through the proxy on this host, which serve trusts


async def test_a_bombing_run_sends_at_most_one_mail_per_mailbox(project: Path) -> None:
    env = {**SIGNUP_ENV, "NEWSLETTER_SIGNUP__PER_CLIENT_BURST": "5"}
    with running_service(project, **env) as site:
        base = site.url

        def victim_from(n: int) -> int:
            with httpx.Client() as client:
                address = VICTIM[n % len(VICTIM)]
                return post_signup(
                    base, address, headers=_from(f"203.0.113.{n}"), client=client
                ).status_code

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(victim_from, range(48)))
        assert set(answers) == {200}  # each told the same

        one_client = [
            post_signup(base, f"target{n}@example.org", headers=_from("198.51.100.1")).status_code
            for n in range(20)
        ]
        assert one_client[:5] == [200] * 5
        assert set(one_client[5:]) == {429}

        unsolved = [
            post_signup(base, f"nowork{n}@example.org", work=w, headers=_from(f"192.0.2.{n}"))
            for n, w in enumerate([None, "", "e30=", "garbage"] * 5)
        ]
        assert {a.status_code for a in unsolved} == {400}

        json_victim = [
            post_json(
                base,
                {"email": VICTIM[n % 4], "altcha": solved(base)},
                headers=_from(f"203.0.113.{100 + n}"),
            ).status_code
            for n in range(8)
        ]
        json_unsolved = [
            post_json(
                base, {"email": f"jnowork{n}@example.org"}, headers=_from(f"192.0.2.{50 + n}")
            )
            for n in range(8)
        ]
        assert set(json_victim) == {202}
        assert {a.status_code for a in json_unsolved} == {400}
        target = site.settings.database_target

    mails = queued(target)
    mailboxes = [mailbox_key(m.recipient) for m in mails]
    assert len(mailboxes) == len(set(mailboxes))  # one per mailbox, queued once
    assert mailboxes.count("victim@gmail.com") == 1
    assert not [m for m in mails if "nowork" in m.recipient]

    handler = FaultyHandler()
    async with start(handler) as server:
        done = await newsletter(["worker", "--once"], environment(server.port), project)
    assert done.code == 0, done.err
    delivered = [
        mailbox_key(r) for r in handler.by_recipient for _ in range(handler.by_recipient[r])
    ]
    assert sorted(delivered) == sorted(mailboxes)
    assert delivered.count("victim@gmail.com") == 1
    assert len(delivered) == 1 + 5
