"""The doctor's checks of several relays and of the provider's webhook, as library calls:
each relay against a real aiosmtpd server (with AUTH and without, a wrong password, a closed
port), connect, EHLO, AUTH and QUIT only (nothing sent); and whether a signed event from the
provider named in [webhooks] relay was ever applied (the webhook_events table, SQLite)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from newsletter.config.settings import Settings, load_settings
from newsletter.database import open_project_database
from newsletter.doctor.local import check_webhook
from newsletter.doctor.network import check_relays
from support.smtp import Authenticator, FaultyHandler, start


def settings_of(tmp_path: Path, text: str, **env: str) -> Settings:
    config = tmp_path / "newsletter.toml"
    config.write_text(text, encoding="utf-8")
    return load_settings(config, env)


def relay(name: str, port: int, extra: str = "") -> str:
    return f'[smtp.relays.{name}]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n{extra}\n'


async def test_each_relay_is_checked_with_its_own_credentials_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    (
        guarded,
        backup,
        open_,
    ) = FaultyHandler(), FaultyHandler(), FaultyHandler()
    with socket.socket() as held:  # bound, never listening
        held.bind(("127.0.0.1", 0))
        closed = held.getsockname()[1]
        async with (
            start(guarded, auth=Authenticator("news", "right")) as primary,
            start(backup, auth=Authenticator("b", "right")) as second,
            start(open_) as third,
        ):
            settings = settings_of(
                tmp_path,
                f'[smtp]\nhost = "127.0.0.1"\nport = {primary.port}\nsecurity = "none"\n'
                'username = "news"\n\n'
                + relay("backup", second.port, 'username = "b"\npassword_env = "BACKUP_PW"')
                + relay("open", third.port)
                + relay("gone", closed)
                + relay("nopw", third.port, 'username = "x"\npassword_env = "NOPE_PW"'),
                NEWSLETTER_SMTP_PASSWORD="right",
                BACKUP_PW="wrong",
            )
            found = {d.name: d for d in await check_relays(settings)}
    assert list(found) == ["smtp", "smtp.backup", "smtp.open", "smtp.gone", "smtp.nopw"]
    assert found["smtp"].ok, found["smtp"]
    assert (
        found["smtp"].detail == f"127.0.0.1:{primary.port}: connected, AUTH as news (nothing sent)"
    )
    assert not found["smtp.backup"].ok
    assert "AUTH refused for user 'b'" in found["smtp.backup"].detail
    assert "[smtp.relays.backup]" in found["smtp.backup"].fix
    assert "BACKUP_PW" in found["smtp.backup"].fix
    assert "wrong" not in found["smtp.backup"].detail + found["smtp.backup"].fix
    assert found["smtp.open"].ok
    assert found["smtp.open"].detail == f"127.0.0.1:{third.port}: connected (nothing sent)"
    assert not found["smtp.gone"].ok
    assert not found["smtp.nopw"].ok
    assert "NOPE_PW is not set" in found["smtp.nopw"].detail
    assert guarded.received == backup.received == open_.received == []


def test_the_providers_webhook_is_proven_by_a_signed_event_applied(tmp_path: Path) -> None:
    assert check_webhook(settings_of(tmp_path, "")) == []  # our own return path: no check
    settings = settings_of(
        tmp_path,
        '[newsletter]\nbase_url = "https://news.example.org"\n\n[webhooks]\nrelay = "sendgrid"\n',
        NEWSLETTER_WEBHOOK_SENDGRID_KEY="a-verification-key",
    )
    (before,) = check_webhook(settings)
    assert not before.ok
    assert "no outbox yet" in before.detail
    assert "https://news.example.org/webhooks/sendgrid" in before.fix
    with open_project_database(settings) as database:
        (none,) = check_webhook(settings)
        assert not none.ok
        assert "no signed sendgrid event received yet" in none.detail
        database.webhook_events.claim("resend", "evt-1", time.time())  # another provider's
        assert not check_webhook(settings)[0].ok
        old = time.time() - 86_400
        database.webhook_events.claim("sendgrid", "evt-2", old - 10)
        database.webhook_events.claim("sendgrid", "evt-3", old)
        # The replay window: old ids go, but not when the provider was last heard from.
        assert database.webhook_events.prune(time.time() - 300) == 2
        assert database.webhook_events.last_seen("sendgrid") == old
        assert database.webhook_events.claim("sendgrid", "evt-2", time.time())  # pruned: new
    (after,) = check_webhook(settings)
    assert after.ok, after
    assert after.detail.startswith("sendgrid: the last signed event was received at ")
