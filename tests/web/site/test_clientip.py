"""The client's address: X-Forwarded-For believed only through `[serve] trusted_proxies`,
read from the right; whatever a client writes into the header cannot make it someone else."""

from __future__ import annotations

import pytest

from newsletter.config.settings import Settings
from newsletter.web.site.clientip import client_ip, parse_address, scope_client_ip, trusted_networks

LOCAL = trusted_networks(("127.0.0.1/32", "::1/128"))
CHAIN = trusted_networks(("127.0.0.1/32", "10.0.0.0/8", "2001:db8:ffff::/48"))


@pytest.mark.parametrize(
    ("peer", "header", "trusted", "client"),
    [
        # No proxy trusted: the peer, whatever the header says.
        ("203.0.113.7", ["198.51.100.1"], (), "203.0.113.7"),
        # A peer that is no trusted proxy wrote the header itself: ignored.
        ("203.0.113.7", ["198.51.100.1"], LOCAL, "203.0.113.7"),
        # The proxy on this host: the address it appended.
        ("127.0.0.1", ["198.51.100.1"], LOCAL, "198.51.100.1"),
        # A client's forged entries sit left of what the proxy appended: never reached.
        ("127.0.0.1", ["1.1.1.1, 127.0.0.1, 198.51.100.1"], LOCAL, "198.51.100.1"),
        # Two proxies we trust, then the client; the entry left of it is the client's word.
        ("127.0.0.1", ["6.6.6.6, 198.51.100.1, 10.1.2.3"], CHAIN, "198.51.100.1"),
        # The header split over several lines is one list, in order.
        ("127.0.0.1", ["6.6.6.6, 198.51.100.1", "10.1.2.3"], CHAIN, "198.51.100.1"),
        # Every hop trusted: the leftmost is as far as we can see.
        ("127.0.0.1", ["10.9.9.9, 10.1.2.3"], CHAIN, "10.9.9.9"),
        # No header: the proxy itself.
        ("127.0.0.1", [], LOCAL, "127.0.0.1"),
        ("127.0.0.1", ["", " , "], LOCAL, "127.0.0.1"),
        # Garbage where an address should be stops the walk at the last trusted hop.
        ("127.0.0.1", ["198.51.100.1, unknown"], LOCAL, "127.0.0.1"),
        ("127.0.0.1", ["198.51.100.1, _hidden"], LOCAL, "127.0.0.1"),
        ("127.0.0.1", ["6.6.6.6, garbage, 10.1.2.3"], CHAIN, "10.1.2.3"),
        # Ports, brackets, IPv6 and IPv4-mapped forms.
        ("127.0.0.1", ["198.51.100.1:4711"], LOCAL, "198.51.100.1"),
        ("127.0.0.1", ["[2001:db8::7]:443"], LOCAL, "2001:db8::7"),
        ("::1", ["2001:db8::7"], LOCAL, "2001:db8::7"),
        ("::ffff:127.0.0.1", ["198.51.100.1"], LOCAL, "198.51.100.1"),
        ("127.0.0.1", ["::ffff:198.51.100.1"], LOCAL, "198.51.100.1"),
        ("2001:db8:ffff::1", ["2001:db8::9"], CHAIN, "2001:db8::9"),
        # No peer (a Unix socket): nothing known.
        (None, ["198.51.100.1"], LOCAL, None),
    ],
)
def test_the_chain_is_read_from_the_right_through_trusted_proxies(
    peer: str | None, header: list[str], trusted: tuple[object, ...], client: str | None
) -> None:
    assert client_ip(peer, header, trusted) == client  # type: ignore[arg-type]


def test_a_huge_header_is_read_from_its_right_end_only() -> None:
    forged = ", ".join(f"10.0.{n >> 8 & 255}.{n & 255}" for n in range(5000))
    assert client_ip("127.0.0.1", [forged + ", 198.51.100.1"], CHAIN) == "198.51.100.1"
    # All trusted to the cut: the walk stops at the cut, never at a half-read address.
    assert client_ip("127.0.0.1", [forged], CHAIN) in {
        f"10.0.{n >> 8 & 255}.{n & 255}" for n in range(5000)
    }


@pytest.mark.parametrize(
    "text",
    ["", "unknown", "1.2.3", "fe80::1%eth0", "[::1", "[::1]x", "[::1]:", "1.2.3.4.5", "0x7f.0.0.1"],
)
def test_what_is_no_address_is_none(text: str) -> None:
    assert parse_address(text) is None


def test_an_asgi_scope_uses_the_socket_peer_and_every_header_line() -> None:
    scope = {
        "client": ("127.0.0.1", 50000),
        "headers": [
            (b"x-forwarded-for", b"6.6.6.6"),
            (b"host", b"news.example.org"),
            (b"x-forwarded-for", b"198.51.100.1"),
        ],
    }
    assert scope_client_ip(scope, LOCAL) == "198.51.100.1"
    assert scope_client_ip({"headers": []}, LOCAL) is None


def test_the_setting_defaults_to_a_proxy_on_this_host_and_refuses_what_is_no_network() -> None:
    assert Settings().serve.trusted_proxies == ["127.0.0.1/32", "::1/128"]
    custom = Settings.model_validate({"serve": {"trusted_proxies": ["10.0.0.1", "fd00::/8"]}})
    assert custom.serve.trusted_proxies == ["10.0.0.1/32", "fd00::/8"]
    with pytest.raises(ValueError, match=r"'proxy\.example\.org': not an IP network"):
        Settings.model_validate({"serve": {"trusted_proxies": ["proxy.example.org"]}})
