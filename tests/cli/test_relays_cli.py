"""Several relays as a user configures and runs them: `send` through a backup when [smtp]'s own
relay refuses connections, `status` and its CSV naming the relay of each row, and the config's
mistakes named by file and line."""

from __future__ import annotations

import csv
import socket
from pathlib import Path

import pytest

from newsletter.config.settings import load_settings
from newsletter.errors import ConfigError
from support.sendcli import environment, newsletter, write_list
from support.smtp import FaultyHandler, start


@pytest.mark.slow
async def test_send_goes_through_the_backup_and_status_says_so(project: Path) -> None:
    write_list(project / "big.csv", 8)
    handler = FaultyHandler()
    with socket.socket() as held:  # bound, never listening: the primary refuses connections
        held.bind(("127.0.0.1", 0))
        closed = str(held.getsockname()[1])
        async with start(handler) as backup:
            env = environment(
                int(closed),
                NEWSLETTER_LISTS__MAIN__PATH="big.csv",
                NEWSLETTER_SMTP__RELAYS__BACKUP__HOST="127.0.0.1",
                NEWSLETTER_SMTP__RELAYS__BACKUP__PORT=str(backup.port),
                NEWSLETTER_SMTP__RELAYS__BACKUP__SECURITY="none",
            )
            done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
            status = await newsletter(
                ["status", "--issue", "14", "--list", "main", "--csv", "log.csv"], env, project
            )
    assert done.code == 0, done.err
    assert sorted(handler.by_recipient.values()) == [1] * 8
    assert "  relay     backup: 8 sent" in status.out
    rows = list(csv.DictReader((project / "log.csv").open(encoding="utf-8")))
    assert {r["relay"] for r in rows} == {"backup"}


def _load(tmp_path: Path, text: str, **env: str) -> ConfigError:
    config = tmp_path / "newsletter.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, env)
    return caught.value


def test_a_domain_routed_through_two_relays_is_named_at_its_line(tmp_path: Path) -> None:
    error = _load(
        tmp_path,
        '[smtp]\nhost = "mail.example.org"\n\n[smtp.relays.ms]\nhost = "a.example.net"\n'
        'domains = ["outlook.com"]\n\n[smtp.relays.other]\nhost = "b.example.net"\n'
        'domains = ["OUTLOOK.com"]\n',
    )
    assert f"{tmp_path / 'newsletter.toml'}:" in error.message
    assert "smtp.relays: outlook.com is routed through both ms and other" in error.message


def test_a_relay_password_in_the_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    error = _load(tmp_path, '[smtp.relays.backup]\nhost = "b.example.net"\npassword = "hunter2"\n')
    assert f"{tmp_path / 'newsletter.toml'}:1: smtp.relays.backup.password" in error.message
    assert "hunter2" not in error.message + (error.hint or "")
    assert "NEWSLETTER_SMTP_BACKUP_PASSWORD" in (error.hint or "")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('[smtp.relays.Backup]\nhost = "b"\n', "is not a relay name"),
        ("[smtp.relays.backup]\nport = 25\n", "smtp.relays.backup.host: Field required"),
        ('[smtp.relays.backup]\nhost = "b"\ndomains = ["not a domain"]\n', "recipient domain"),
        ('[smtp]\nname = "main"\n\n[smtp.relays.main]\nhost = "b"\n', "[smtp]'s own relay"),
        ('[smtp]\nset_aside = "soon"\n', "smtp.set_aside"),
    ],
)
def test_relay_mistakes_name_the_field(tmp_path: Path, table: str, expected: str) -> None:
    error = _load(tmp_path, table)
    assert str(tmp_path / "newsletter.toml") in error.message
    assert expected in error.message


def test_a_relay_password_comes_from_the_variable_it_names(tmp_path: Path) -> None:
    config = tmp_path / "newsletter.toml"
    config.write_text(
        '[smtp.relays.backup]\nhost = "b.example.net"\nusername = "u"\n'
        'password_env = "BACKUP_PW"\nport = 2525\n\n[smtp.relays.ms]\nhost = "m.example.net"\n',
        encoding="utf-8",
    )
    settings = load_settings(config, {"BACKUP_PW": "s3cret"})
    backup = settings.smtp.relays["backup"]
    assert backup.password is not None
    assert backup.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)
    assert list(settings.smtp.relays) == ["backup", "ms"]  # the order written
    merged = settings.smtp.relay("backup")
    assert (merged.host, merged.port, merged.timeout) == ("b.example.net", 2525, 30.0)


@pytest.mark.slow
async def test_a_send_past_the_warmup_cap_exits_4_with_the_status_line(project: Path) -> None:
    write_list(project / "big.csv", 8)
    config = project / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("[send]\n", "[send]\nwarmup = [3, 1000]\n", 1), "utf-8")
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(
            server.port,
            NEWSLETTER_LISTS__MAIN__PATH="big.csv",
            NEWSLETTER_NEWSLETTER__TIMEZONE="Europe/Berlin",
        )
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert done.code == 4, done.out + done.err
    assert "warm-up: 3 of 8 today, resumes at 00:00 Europe/Berlin" in done.out + done.err
    assert len(handler.received) == 3
