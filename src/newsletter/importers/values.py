"""The time and IP cells of other tools' exports in; UTC datetimes and canonical addresses out.

Each tool writes times its own way, all seen in their exports or code:

    Mailchimp   2016-04-18 13:51:14                      (UTC, no zone written)
    Substack    2018-12-25T20:43:22.178Z                 (ISO 8601)
    Ghost       2024-01-15T10:00:00.000Z                 (ISO 8601)
    Buttondown  2024-03-13 00:03:09.183465+00:00         (Python's str() of a datetime)
    listmonk    2020-04-08 21:55:20.123456 +0530 IST     (Go's time.Time.String(); the zero
                0001-01-01 00:00:00 +0000 UTC             time means "never")

A cell that fits none is a ValueError with a reason; the caller keeps the raw text.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re

MAX_CELL = 100  # a time or an IP is short; anything longer is not one

_GO_TIME = re.compile(
    r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,9}))? ([+-]\d\d)(\d\d)"
    r"(?: [A-Za-z0-9+-]{1,10})?(?: m=[+-]\d+(?:\.\d+)?)?"
)
_FRACTION = re.compile(r"(\.\d{6})\d+")  # Python's parser takes at most microseconds


def parse_time(text: str) -> dt.datetime | None:
    """A timestamp cell -> an aware UTC datetime; None for an empty cell or Go's zero time;
    ValueError (saying what was expected) for anything else. A time without a zone is UTC."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_CELL:
        raise ValueError("is too long to be a time")
    go = _GO_TIME.fullmatch(text)
    if go:
        day, clock, fraction, hours, minutes = go.groups()
        text = f"{day}T{clock}{'.' + fraction if fraction else ''}{hours}:{minutes}"
    value = _FRACTION.sub(r"\1", text.replace("Z", "+00:00").replace("z", "+00:00"))
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time (expected e.g. 2024-03-13 00:03:09 or 2024-03-13T00:03:09Z)"
        ) from None
    if parsed.year == 1:  # Go's zero time: the tool never set it
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def parse_ip(text: str) -> str | None:
    """An IP cell -> the address in canonical form (IPv4-mapped IPv6 as IPv4); None if empty;
    ValueError if it is not an IP address."""
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_CELL:
        raise ValueError("is too long to be an IP address")
    try:
        address = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def parse_flag(text: str) -> bool:
    """A true/false cell as the tools write them -> bool; ValueError for anything else."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ValueError(f"is {text.strip()!r}; expected true or false")
