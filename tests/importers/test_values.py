"""The tools' time, IP and flag cells: every format they write read to UTC, anything else a
ValueError with a reason; and the name hidden in a Buttondown metadata cell."""

from __future__ import annotations

import datetime as dt

import pytest

from newsletter.importers.formats import metadata_name
from newsletter.importers.values import parse_flag, parse_ip, parse_time

UTC = dt.UTC


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("2016-04-18 13:51:14", dt.datetime(2016, 4, 18, 13, 51, 14, tzinfo=UTC)),  # Mailchimp
        ("2018-12-25T20:43:22.178Z", dt.datetime(2018, 12, 25, 20, 43, 22, 178000, tzinfo=UTC)),
        (
            "2024-03-13 00:03:09.183465+00:00",
            dt.datetime(2024, 3, 13, 0, 3, 9, 183465, tzinfo=UTC),
        ),
        (
            "2020-04-08 21:55:20.123456789 +0530 IST",  # Go, nanoseconds, a zone name
            dt.datetime(2020, 4, 8, 16, 25, 20, 123456, tzinfo=UTC),
        ),
        ("2021-01-01 00:00:00 -0800 PST m=+0.000123", dt.datetime(2021, 1, 1, 8, tzinfo=UTC)),
        ("2022-06-01T12:00:00+02:00", dt.datetime(2022, 6, 1, 10, tzinfo=UTC)),
        ("2022-06-01", dt.datetime(2022, 6, 1, tzinfo=UTC)),
        ("  2022-06-01T00:00:00z ", dt.datetime(2022, 6, 1, tzinfo=UTC)),
        ("", None),
        ("   ", None),
        ("0001-01-01 00:00:00 +0000 UTC", None),  # Go's zero time: never set
    ],
)
def test_each_tools_times_are_read_to_utc(cell: str, expected: dt.datetime | None) -> None:
    assert parse_time(cell) == expected


@pytest.mark.parametrize(
    "cell",
    ["someday", "2021-13-01", "2021-02-30 10:00:00", "10:00", "1" * 101, "2021-01-01T25:00:00Z"],
)
def test_a_cell_that_is_no_time_is_a_value_error(cell: str) -> None:
    with pytest.raises(ValueError, match="time"):
        parse_time(cell)


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("198.51.100.23", "198.51.100.23"),
        ("2001:DB8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("", None),
    ],
)
def test_ips_are_canonical(cell: str, expected: str | None) -> None:
    assert parse_ip(cell) == expected


@pytest.mark.parametrize("cell", ["not-an-ip", "999.1.1.1", "192.0.2.1:80", "x" * 200])
def test_a_cell_that_is_no_ip_is_a_value_error(cell: str) -> None:
    with pytest.raises(ValueError, match="IP address"):
        parse_ip(cell)


def test_flags() -> None:
    assert [parse_flag(v) for v in ("true", "TRUE", " 1 ", "false", "0", "No")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="expected true or false"):
        parse_flag("")


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("{'name': 'Liz Lemon', 'role': 'writer'}", "Liz Lemon"),
        ('{"first_name": "Jack", "last_name": "Donaghy"}', "Jack Donaghy"),
        ('{"Full_Name": "Tracy Jordan"}', "Tracy Jordan"),
        ('{"last_name": "Only"}', "Only"),
        ("{}", ""),
        ("", ""),
        ("[1, 2]", ""),
        ('{"name": 5}', ""),
        ("not a dict at all", ""),
        ("__import__('os').system('true')", ""),  # literal_eval evaluates nothing
        ("[" * 5000 + "]" * 5000, ""),  # too deep for the parser: no crash
        ("{'name': '" + "x" * 20_000 + "'}", ""),  # past the bound: not parsed at all
    ],
)
def test_buttondown_names_come_from_metadata_safely(cell: str, expected: str) -> None:
    assert metadata_name(cell) == expected
