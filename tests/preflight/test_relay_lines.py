"""`check --online` with several relays: one line per relay (it answers and takes our
credentials, or what failed and the fix), and the provider's webhook line; nothing sent. The CLI
in a thread, so this test's event loop serves the aiosmtpd relays meanwhile."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.dnszone import ZoneResolver
from support.onlineproject import configure, write_issue
from support.smtp import Authenticator, FaultyHandler, start
from support.websites import Site


@pytest.mark.slow
async def test_check_online_says_which_relay_answers_and_takes_our_password(
    project: Path,
    dns: tuple[int, ZoneResolver],
    http_site: Site,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base)
    write_issue(project, 15, {"好": [http_site.url("/ok?relays")]})
    handler = FaultyHandler()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        closed = held.getsockname()[1]
        async with start(handler, auth=Authenticator("news", "right")) as relay:
            for key, value in {
                "NEWSLETTER_SMTP__HOST": "127.0.0.1",
                "NEWSLETTER_SMTP__PORT": str(relay.port),
                "NEWSLETTER_SMTP__SECURITY": "none",
                "NEWSLETTER_SMTP__USERNAME": "news",
                "NEWSLETTER_SMTP_PASSWORD": "right",
                "NEWSLETTER_SMTP__RELAYS__BACKUP__HOST": "127.0.0.1",
                "NEWSLETTER_SMTP__RELAYS__BACKUP__PORT": str(closed),
                "NEWSLETTER_SMTP__RELAYS__BACKUP__SECURITY": "none",
                "NEWSLETTER_WEBHOOKS__RELAY": "postmark",
                "NEWSLETTER_WEBHOOK_POSTMARK_PASSWORD": "a-basic-auth-password",
            }.items():
                monkeypatch.setenv(key, value)
            result = await asyncio.to_thread(
                CliRunner().invoke, cli, ["check", "--issue", "15", "--online"]
            )
    out = result.stdout
    assert f"smtp: ok: 127.0.0.1:{relay.port}: connected, AUTH as news (nothing sent)" in out
    assert f"smtp.backup: FAILED: 127.0.0.1:{closed} (none): cannot connect" in out
    assert "webhook: FAILED: no outbox yet: no signed postmark event received" in out
    assert handler.received == []
