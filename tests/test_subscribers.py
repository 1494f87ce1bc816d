"""Loading subscriber lists: hostile rows are reported with path:line and skipped, never fatal."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from email_validator import EmailNotValidError, validate_email

from newsletter.errors import SubscriberListError
from newsletter.importers.subscribers import (
    ListReport,
    _AddressChecker,
    address_key,
    check_list,
    read_subscribers,
)
from newsletter.models import Subscriber


def write(tmp_path: Path, content: str | bytes, name: str = "list.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def load(path: Path, **kwargs: object) -> tuple[list[Subscriber], ListReport]:
    report = ListReport(path)
    subscribers = list(read_subscribers(path, report, **kwargs))  # type: ignore[arg-type]
    return subscribers, report


def reasons(report: ListReport) -> list[str]:
    return [str(p) for p in report.rejected]


def test_example_list(project: Path) -> None:
    subscribers, report = load(project / "subscribers.example.csv")
    assert [s.envelope for s in subscribers] == [
        "li.lei@example.com",
        "han.meimei@example.org",
        "alice@example.net",
        "bob@example.net",
        "carol@xn--fsqu00a.xn--55qx5d",
    ]
    assert report.counts() == {
        "valid": 5,
        "duplicate": 1,
        "invalid": 1,
        "unsubscribed": 1,
        "suppressed": 0,
    }
    assert subscribers[0].name == "李雷"
    assert subscribers[0].line == 2
    path = project / "subscribers.example.csv"
    assert reasons(report) == [
        f"{path}:8: email: 'ALICE@EXAMPLE.NET' duplicates line 4 "
        "(addresses compare case-insensitively)",
        f"{path}:9: email: 'not-an-address' is not a valid address: "
        "An email address must have an @-sign.",
    ]


def test_idn_domain_gets_a_punycode_envelope(tmp_path: Path) -> None:
    path = write(tmp_path, "email,name\nCarol@例子.公司,王小明\nzoë@example.com,Zoë\n")
    subscribers, report = load(path)
    assert subscribers[0].envelope == "Carol@xn--fsqu00a.xn--55qx5d"
    # A non-ASCII local part needs SMTPUTF8 end to end: refused with the reason.
    assert report.invalid == 1
    assert "3: email: 'zoë@example.com'" in reasons(report)[0]


def test_bom_and_crlf_line_ends(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbfEmail,Name\r\na@example.com,A\r\nb@example.com,B\r\n")
    subscribers, report = load(path)
    assert [s.envelope for s in subscribers] == ["a@example.com", "b@example.com"]
    assert report.rejected == []


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('"Evil\r\nBcc: victim@example.com"', "U+000D"),
        ('"Evil\nBcc: victim@example.com"', "U+000A"),
        ('"Bob\n"', "U+000A"),
        ("Nul\x00Byte", "U+0000"),
        ("Bell\x07", "U+0007"),
        ("Line\u2028Separator", "U+2028"),
        ("Next\x85Line", "U+0085"),
        ("=?UTF-8?Q?=0A?=", "encoded word"),
        ("=?utf-8?b?QmNjOiB4QGV4YW1wbGUuY29t?=", "encoded word"),
        ("Tab\tName", "U+0009"),
    ],
)
def test_header_unsafe_names_are_rejected_with_row_and_field(
    tmp_path: Path, cell: str, expected: str
) -> None:
    path = write(tmp_path, f"email,name\nok@example.com,Fine\nbad@example.com,{cell}\n")
    subscribers, report = load(path)
    assert [s.envelope for s in subscribers] == ["ok@example.com"]
    assert report.invalid == 1
    (reason,) = reasons(report)
    assert reason.startswith(f"{path}:3: name: ")
    assert expected in reason


def test_encoded_word_in_local_part_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "email\n=?utf-8?q?=0a?=@example.com\n")
    subscribers, report = load(path)
    assert subscribers == []
    assert "2: email: contains a raw `=?...?=` encoded word" in reasons(report)[0]


def test_quoted_multiline_field_keeps_later_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, 'email,name,note\na@example.com,A,"two\nlines"\nbroken,B,x\n')
    subscribers, report = load(path)
    assert [s.envelope for s in subscribers] == ["a@example.com"]
    assert reasons(report) == [
        f"{path}:4: email: 'broken' is not a valid address: An email address must have an @-sign."
    ]


def test_duplicates_are_case_insensitive_and_keep_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "email,name\nBob@Example.com,First\nbob@example.COM,Second\nBOB@EXAMPLE.COM,Third\n",
    )
    subscribers, report = load(path)
    assert [(s.envelope, s.name) for s in subscribers] == [("Bob@example.com", "First")]
    assert report.duplicate == 2
    assert all("duplicates line 2" in r for r in reasons(report))


def test_unsubscribed_first_wins_over_a_later_subscribed_duplicate(tmp_path: Path) -> None:
    path = write(tmp_path, "email,status\na@example.com,unsubscribed\nA@example.com,subscribed\n")
    subscribers, report = load(path)
    assert subscribers == []
    assert (report.unsubscribed, report.duplicate) == (1, 1)


def test_invalid_addresses_and_statuses(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "email,name,status\n"
        ",Empty,\n"
        "a@b,No dot,\n"
        "a..b@example.com,Double dot,\n"
        "a@example.com,Bad status,maybe\n"
        "x@localhost,Local,\n"
        "Bob <bob@example.com>,Display,\n"
        "ok@example.com,OK,SUBSCRIBED\n",
    )
    subscribers, report = load(path)
    assert [s.envelope for s in subscribers] == ["ok@example.com"]
    assert report.invalid == 6
    found = reasons(report)
    assert found[0] == f"{path}:2: email: is empty"
    assert found[3] == f"{path}:5: status: is 'maybe'; use subscribed or unsubscribed"
    assert [r.split(": ")[0] for r in found] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6, 7)]


def test_suppressed_addresses_are_skipped_by_their_key(tmp_path: Path) -> None:
    path = write(tmp_path, "email\nA@Example.com\nb@example.com\ncarol@例子.公司\n")
    suppressed = {address_key("a@example.com"), address_key("CAROL@例子.公司")}
    assert address_key("CAROL@例子.公司") == "carol@xn--fsqu00a.xn--55qx5d"
    subscribers, report = load(path, suppressed=suppressed)
    assert [s.envelope for s in subscribers] == ["b@example.com"]
    assert report.suppressed == 2
    assert report.rejected == []


def test_extra_columns_are_ignored_and_too_many_fields_are_rejected(tmp_path: Path) -> None:
    path = write(
        tmp_path, "email,name,company,city\na@example.com,A,Acme,北京\nb@example.com,Chen, Bo,X,Y\n"
    )
    subscribers, report = load(path)
    assert [(s.envelope, s.name) for s in subscribers] == [("a@example.com", "A")]
    assert "3: has 5 fields but the header has 4" in reasons(report)[0]


def test_invalid_utf8_row_is_reported_not_fatal(tmp_path: Path) -> None:
    path = write(tmp_path, b"email,name\nlatin@example.com,Jos\xe9\nok@example.com,OK\n")
    subscribers, report = load(path)
    assert [s.envelope for s in subscribers] == ["ok@example.com"]
    assert reasons(report) == [f"{path}:2: is not valid UTF-8 (save the file as UTF-8)"]


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "email,name\n\na@example.com,A\n,\n\nb@example.com,B\n")
    subscribers, report = load(path)
    assert [s.line for s in subscribers] == [3, 6]
    assert report.rejected == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        ("name,status\nA,subscribed\n", "has no `email` column"),
        ("email,name,Email\n", "column 'email' appears twice"),
    ],
)
def test_unusable_files_raise_a_list_error(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(SubscriberListError, match=message):
        read_subscribers(write(tmp_path, content), ListReport(tmp_path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SubscriberListError, match="no such subscriber list"):
        check_list(tmp_path / "nope.csv")


def test_every_rejection_reaches_the_callback_beyond_the_kept_ones(tmp_path: Path) -> None:
    rows = "".join(f"bad{i}\n" for i in range(1200))
    path = write(tmp_path, "email\n" + rows)
    seen: list[str] = []
    report = ListReport(path)
    list(read_subscribers(path, report, on_reject=lambda p: seen.append(str(p))))
    assert report.invalid == 1200
    assert len(seen) == 1200
    assert len(report.rejected) == 1000


def test_rows_are_streamed_not_read_up_front(tmp_path: Path) -> None:
    path = write(tmp_path, "email\n" + "".join(f"u{i}@example.com\n" for i in range(50_000)))
    report = ListReport(path)
    stream = read_subscribers(path, report)
    first = next(iter(stream))
    assert first.envelope == "u0@example.com"
    assert report.valid == 1  # the rest has not been looked at yet


def test_cached_domain_fast_path_agrees_with_email_validator() -> None:
    rng = random.Random(14)
    locals_ = ["a", "A.b", "o'neil", "x+tag", "a..b", ".a", "a.", "ü", '"q"', "a b", "-", "a" * 64]
    locals_ += ["a" * 65, "=?x?=", "{}", "a@b", ""]
    domains = ["example.com", "EXAMPLE.com", "例子.公司", "x.test", "sub.example.org", "a-.com"]
    addresses = [f"{lp}@{d}" for lp in locals_ for d in domains]
    rng.shuffle(addresses)
    checker = _AddressChecker()
    for address in addresses * 2:  # the second round runs with every domain cached
        try:
            result = validate_email(address, check_deliverability=False, allow_smtputf8=False)
            expected: tuple[str, str] | None = (
                result.normalized,
                result.ascii_email or result.normalized,
            )
        except EmailNotValidError:
            expected = None
        got = checker.check(address)
        assert (None if isinstance(got, str) else got) == expected, address


def test_unclosed_quote_names_its_row_and_keeps_every_later_row(tmp_path: Path) -> None:
    # issue 13.1: the rest of the file was read into Li Lei's name, "0 valid, 1 invalid".
    path = write(
        tmp_path,
        'email,name\r\na@example.org,"Li Lei\r\nb@example.org,Bob\r\nc@example.org,Carol\r\n',
    )
    subscribers, report = load(path)
    assert [(s.envelope, s.name, s.line) for s in subscribers] == [
        ("b@example.org", "Bob", 3),
        ("c@example.org", "Carol", 4),
    ]
    (reason,) = reasons(report)
    assert reason.startswith(f'{path}:2: name: opens a double quote (") that is never closed')
    assert report.counts() == {
        "valid": 2,
        "duplicate": 0,
        "invalid": 1,
        "unsubscribed": 0,
        "suppressed": 0,
    }
    assert report.rows == 3


def test_unclosed_quote_beyond_the_field_size_limit_loses_no_row(tmp_path: Path) -> None:
    # issue 13.1: 5,002 rows with `"Li ""Lei` on line 2 gave 404 valid, 1 invalid.
    rows = "".join(f"u{i}@example.org,User {i}\r\n" for i in range(5_000))
    path = write(tmp_path, f'email,name\r\na@example.org,"Li ""Lei\r\n{rows}x@example.org,X\r\n')
    subscribers, report = load(path)
    assert len(subscribers) == 5_001
    assert subscribers[0].line == 3
    assert subscribers[-1].line == 5_003
    assert [p.line for p in report.rejected] == [2]
    assert report.invalid == 1
    assert report.rows == 5_002


def test_several_unclosed_quotes_each_reject_only_their_row(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'email,name,note\na@example.org,A,"open\nb@example.org,"B\nc@example.org,C,"two\nlines"\n'
        'd@example.org,D,x\n"e@example.org,E\n',
    )
    subscribers, report = load(path)
    assert [(s.envelope, s.line) for s in subscribers] == [
        ("c@example.org", 4),
        ("d@example.org", 6),
    ]
    assert [(p.line, p.field) for p in report.rejected] == [(2, "note"), (3, "name"), (7, "email")]
    assert report.rows == 5


def test_unclosed_quote_in_the_header_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'email,"name\na@example.org,A\n')
    with pytest.raises(SubscriberListError, match=r":1: the header row opens a double quote"):
        load(path)
