"""The [check] table: defaults, nameserver addresses, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.config.settings import CheckSettings, load_settings, nameserver_address
from newsletter.errors import ConfigError


def test_defaults_are_offline_with_the_system_resolver(project: Path) -> None:
    check = load_settings(project / "newsletter.toml", environ={}).check
    assert check == CheckSettings()
    assert (check.online, check.nameservers, check.link_skip) == (False, [], [])
    assert check.cache_ttl == 3600


@pytest.mark.parametrize(
    ("entry", "address"),
    [
        ("127.0.0.1", ("127.0.0.1", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("::1", ("::1", 53)),
        ("[::1]:5353", ("::1", 5353)),
    ],
)
def test_nameserver_addresses(entry: str, address: tuple[str, int]) -> None:
    assert nameserver_address(entry) == address


def test_bad_nameserver_names_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[check]\nonline = true\nnameservers = ["dns.example:53"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message == (
        f"{path}:3: check.nameservers: 'dns.example:53': not an IP address "
        "(IP, IP:PORT or [IPv6]:PORT)"
    )
    path.write_text('[check]\nnameservers = ["127.0.0.1:0"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'127.0.0.1:0': port must be 1-65535"):
        load_settings(path, environ={})


def test_link_skip_is_normalised_and_env_turns_online_on(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[check]\nlink_skip = [" Example.ORG. ", ""]\n', encoding="utf-8")
    settings = load_settings(path, environ={"NEWSLETTER_CHECK__ONLINE": "true"})
    assert settings.check.link_skip == ["example.org"]
    assert settings.check.online is True


def test_private_addresses_are_refused_unless_allowed(tmp_path: Path) -> None:
    assert CheckSettings().allow_private is False
    assert CheckSettings().run_timeout == 60
    path = tmp_path / "newsletter.toml"
    path.write_text('[check]\nallow_private = [" 10.1.0.0/16 ", "192.168.1.5"]\n', encoding="utf-8")
    check = load_settings(path, environ={}).check
    assert check.allow_private == ["10.1.0.0/16", "192.168.1.5/32"]
    path.write_text("[check]\nallow_private = true\n", encoding="utf-8")
    assert load_settings(path, environ={}).check.allow_private is True
    path.write_text('[check]\nonline = true\nallow_private = ["intranet"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(f"{path}:3: check.allow_private")
    assert "'intranet': not an IP network (e.g. 10.1.0.0/16, 192.168.1.5, fd00::/8)" in (
        info.value.message
    )
