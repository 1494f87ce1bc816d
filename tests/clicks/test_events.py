"""A request's parts made into an event: user agents classed, prefetches seen, addresses kept
only as `[privacy] ip` says, and everything a stranger sends bounded."""

from __future__ import annotations

import datetime as dt

import pytest

from newsletter.clicks.events import agent_class, click_event, ip_key, is_prefetch, stored_ip
from newsletter.mail.clicktokens import click_token, verify_click
from newsletter.rendering.places import Place, Region

SECRET = "s3cret-for-tests-only-0123456789"
CHROME = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (CHROME, "browser:chrome"),
        (IPHONE, "browser:safari"),
        (CHROME.replace("Safari/537.36", "Safari/537.36 Edg/120.0"), "browser:edge"),
        (
            "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
            "browser:firefox",
        ),
        ("", ""),
        ("   ", ""),
        ("SomethingNew/1.0", "other"),
    ],
)
def test_browsers_are_classed_by_family(agent: str, expected: str) -> None:
    assert agent_class(agent) == expected


@pytest.mark.parametrize(
    "agent",
    [
        "python-requests/2.31.0",
        "curl/8.4.0",
        "Go-http-client/1.1",
        "Microsoft Office Existence Discovery",
        "Barracuda Sentinel (EE)",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",
    ],
)
def test_crawlers_scanners_and_libraries_are_machines(agent: str) -> None:
    """crawlerdetect's list, read from the installed package (no network)."""
    assert agent_class(agent).startswith("machine:")


def test_a_hostile_agent_is_bounded_and_printable() -> None:
    hostile = "python-requests\x1b]0;owned\x07" + "A" * 100_000
    found = agent_class(hostile)
    assert found.startswith("machine:")
    assert len(found) <= 48
    assert "\x1b" not in found
    assert "\x07" not in found


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"sec-purpose": "prefetch"}, True),
        ({"sec-purpose": "prefetch;prerender"}, True),
        ({"purpose": "prefetch"}, True),
        ({"x-moz": "prefetch"}, True),
        ({"x-purpose": "preview"}, True),
        ({"x-purpose": "Preview"}, True),
        ({}, False),
        ({"purpose": "navigate"}, False),
        ({"user-agent": "prefetch"}, False),
    ],
)
def test_prefetch_headers(headers: dict[str, str], expected: bool) -> None:
    assert is_prefetch(headers) is expected


@pytest.mark.parametrize(
    ("address", "kept"),
    [
        ("203.0.113.77", "203.0.113.0/24"),
        ("2001:db8:1234:5678::9", "2001:db8:1234::/48"),
        ("::ffff:198.51.100.9", "198.51.100.0/24"),
        ("not an address", ""),
        ("", ""),
    ],
)
def test_truncated_addresses(address: str, kept: str) -> None:
    assert stored_ip(address, "truncate") == kept


def test_hashed_addresses_link_one_day_and_no_more() -> None:
    key = ip_key(SECRET.encode())
    day = dt.date(2026, 11, 1)
    one = stored_ip("203.0.113.77", "hash", key=key, day=day)
    assert one.startswith("h:")
    assert "203" not in one
    assert stored_ip("203.0.113.77", "hash", key=key, day=day) == one
    assert stored_ip("203.0.113.78", "hash", key=key, day=day) != one
    assert stored_ip("203.0.113.77", "hash", key=key, day=day + dt.timedelta(1)) != one
    assert stored_ip("203.0.113.77", "hash", key=ip_key(b"another-secret"), day=day) != one
    with pytest.raises(ValueError, match="key"):
        stored_ip("203.0.113.77", "hash")


def test_none_keeps_no_address() -> None:
    assert stored_ip("203.0.113.77", "none") == ""


def test_an_event_from_a_per_reader_request() -> None:
    place = Place(Region.LINKS, 0, 1, 0)
    target = verify_click(SECRET, click_token(SECRET, 14, place, "https://a.example/", row=9))
    event = click_event(
        at=1_000_100.0,
        target=target,
        method="get",
        headers={"User-Agent": CHROME, "Sec-Purpose": "prefetch"},
        client="203.0.113.77",
        ip_mode="truncate",
        delivered_at=1_000_000.0,
    )
    assert event.place == place
    assert event.row == 9
    assert event.since_delivery == 100.0
    assert (event.method, event.prefetch, event.agent) == ("GET", True, "browser:chrome")
    assert event.ip == "203.0.113.0/24"


def test_an_aggregate_event_knows_no_reader_and_no_delivery() -> None:
    target = verify_click(
        SECRET, click_token(SECRET, 14, Place(Region.TITLE), "https://a.example/", list_name="main")
    )
    event = click_event(
        at=5.0,
        target=target,
        method="PROPFIND-AND-MORE\r\n",
        headers={},
        client="203.0.113.77",
        ip_mode="none",
        delivered_at=1.0,
    )
    assert (event.row, event.since_delivery, event.ip, event.agent) == (None, None, "", "")
    assert event.method == "OTHER"
