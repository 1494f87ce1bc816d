"""`newsletter serve` on a real PostgreSQL outbox keeps one connection: requests (unsubscribes
and archive pages) reuse it, and one the server terminated is replaced without the reader seeing
an error."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psycopg
import pytest

from support.site import ALICE, one_click_url, running_service

ONE_CLICK = {"List-Unsubscribe": "One-Click"}


def backends(url: str, name: str) -> list[int]:
    """The server processes of the connections `serve` opened (named by application_name)."""
    with psycopg.connect(url) as db:
        rows = db.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchall()
    return sorted(pid for (pid,) in rows)


def wait_until_gone(url: str, name: str, pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while pid in backends(url, name):
        assert time.monotonic() < deadline, f"backend {pid} still there"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.usefixtures("all_published")
def test_requests_share_one_connection_and_a_terminated_one_is_replaced(
    project: Path, postgres_url: str
) -> None:
    name = f"serve-{project.parent.name}"[:60]
    url = f"{postgres_url}&application_name={name}"
    with running_service(project, NEWSLETTER_OUTBOX__URL=url) as service:
        alice = one_click_url(service.settings)
        bob = one_click_url(service.settings, "bob@example.net")
        with httpx.Client() as client:
            assert client.get(alice).status_code == 200  # the confirm page reads the outbox
            assert client.post(alice, data=ONE_CLICK).status_code == 200
            assert client.get(bob).status_code == 200
            # The archive reads when issues were sent on the same connection.
            assert client.get(f"{service.url}/").status_code == 200
            assert client.get(f"{service.url}/issues/14").status_code == 200
            first = backends(postgres_url, name)
            assert len(first) == 1  # five requests, one connection, still open

            with psycopg.connect(postgres_url) as db:
                assert db.execute("SELECT pg_terminate_backend(%s)", (first[0],)).fetchone() == (
                    True,
                )
            wait_until_gone(postgres_url, name, first[0])

            # The next request finds the connection dropped, opens a new one and succeeds.
            assert client.post(bob, data=ONE_CLICK).status_code == 200
            second = backends(postgres_url, name)
            assert len(second) == 1
            assert second != first
            assert client.get(alice).status_code == 200
            assert backends(postgres_url, name) == second
    with psycopg.connect(postgres_url) as db:
        rows = db.execute("SELECT address FROM suppressions ORDER BY address").fetchall()
    assert rows == [(ALICE,), ("bob@example.net",)]
