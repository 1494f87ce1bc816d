"""Other tools' exports read into subscribers with consent, suppressions and refused rows: each
tool's real layout (tests/data/exports), the ZIPs they come in, and hostile files. Every row
read is accounted for: imported + suppressed + refused == rows."""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from pathlib import Path

import pytest

from newsletter.errors import ExportFileError
from newsletter.importers import (
    FORMATS,
    Export,
    Imported,
    ImportedSuppression,
    Outcome,
    Refused,
    read_export,
)
from newsletter.importers.subscribers import Refusal, check_entry

EXPORTS = Path(__file__).resolve().parents[1] / "data" / "exports"
UTC = dt.UTC


@pytest.fixture(autouse=True)
def in_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths are shown relative to the working directory, as the editor typed them."""
    monkeypatch.chdir(EXPORTS)


def read(path: Path, tool: str | None = None, **options: bool) -> tuple[Export, list[Outcome]]:
    export = read_export(path, tool, **options)
    outcomes = list(export)
    report = export.report
    assert (
        report.rows == len(outcomes) == report.imported + report.suppressed + report.refused_count
    )
    return export, outcomes


def imported(outcomes: list[Outcome]) -> dict[str, Imported]:
    return {o.subscriber.envelope: o for o in outcomes if isinstance(o, Imported)}


def suppressed(outcomes: list[Outcome]) -> dict[str, ImportedSuppression]:
    return {o.address: o for o in outcomes if isinstance(o, ImportedSuppression)}


def refused(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.kind}: {o.problem}" for o in outcomes if isinstance(o, Refused)]


def write(tmp_path: Path, text: str | bytes, name: str = "export.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def mailchimp_zip(tmp_path: Path, *extra: tuple[str, str]) -> Path:
    path = tmp_path / "members_export_3f9c1a2b7d.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for member in sorted((EXPORTS / "mailchimp").glob("*.csv")):
            archive.write(member, member.name)
        for name, text in extra:
            archive.writestr(name, text)
    return path


# -- each tool's export ---------------------------------------------------------------------------


def test_a_mailchimp_zip_imports_with_its_consent_and_its_unsubscribes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    export, outcomes = read(mailchimp_zip(tmp_path))
    zipped = "members_export_3f9c1a2b7d.zip"
    assert [p.describe() for p in export.parts] == [
        f"{zipped}:{kind}_members_export_3f9c1a2b7d.csv: "
        "Mailchimp export (detected from its header)"
        for kind in ("cleaned", "subscribed", "unsubscribed")
    ]
    people = imported(outcomes)
    assert sorted(people) == [
        "Grace.Hopper@example.com",
        "ada.lovelace@example.org",
        "alan.turing@example.org",
        "wei.zhang@example.net",
    ]
    ada = people["ada.lovelace@example.org"]
    assert ada.subscriber.name == "Ada Lovelace"
    assert ada.consent.origin.tool == "mailchimp"
    assert str(ada.consent.origin) == f"{zipped}:subscribed_members_export_3f9c1a2b7d.csv:2"
    assert ada.consent.subscribed_at == dt.datetime(2019, 3, 2, 9, 15, 27, tzinfo=UTC)
    assert ada.consent.subscribed_ip == "198.51.100.23"
    assert ada.consent.confirmed_at == dt.datetime(2019, 3, 2, 9, 17, 2, tzinfo=UTC)
    assert ada.consent.confirmed_ip == "198.51.100.23"
    assert ("OPTIN_TIME", "2019-03-02 09:15:27") in ada.consent.evidence
    assert ("LEID", "118244031") in ada.consent.evidence
    # Names are joined as written; a missing first or last name leaves no stray space.
    assert people["wei.zhang@example.net"].subscriber.name == "伟 张"
    assert people["Grace.Hopper@example.com"].consent.subscribed_ip == "2001:db8::1"

    gone = suppressed(outcomes)
    assert set(gone) == {
        "edsger@example.org",
        "barbara.liskov@example.net",
        "gone.mailbox@example.com",
    }
    edsger = gone["edsger@example.org"]
    assert (edsger.reason, edsger.at) == (
        "unsubscribed",
        dt.datetime(2022, 8, 1, 7, 30, tzinfo=UTC),
    )
    assert edsger.detail == "I no longer want to receive these emails; Too many goto statements"
    assert gone["gone.mailbox@example.com"].reason == "cleaned"

    subscribed = f"{zipped}:subscribed_members_export_3f9c1a2b7d.csv"
    assert refused(outcomes) == [
        f"invalid: {subscribed}:5: Email Address: 'not-an-address' is not a valid address: "
        "An email address must have an @-sign.",
        f"duplicate: {subscribed}:6: Email Address: 'grace.hopper@example.com' duplicates "
        f"{subscribed} line 4 (addresses compare case-insensitively)",
    ]
    # A consent value that does not parse is kept verbatim and reported; the person is imported.
    alan = people["alan.turing@example.org"]
    assert (alan.consent.subscribed_at, alan.consent.subscribed_ip) == (None, None)
    assert ("OPTIN_TIME", "someday") in alan.consent.evidence
    assert [str(w) for w in export.report.warnings] == [
        f"{subscribed}:7: OPTIN_TIME: 'someday' is not a time (expected e.g. 2024-03-13 00:03:09 "
        "or 2024-03-13T00:03:09Z); kept as written",
        f"{subscribed}:7: OPTIN_IP: 'not-an-ip' is not an IP address; kept as written",
    ]
    assert export.report.imported == 4
    assert export.report.suppressed == 3


def test_mailchimps_unsubscribed_file_alone_is_all_suppressions() -> None:
    path = EXPORTS / "mailchimp" / "unsubscribed_members_export_3f9c1a2b7d.csv"
    _, outcomes = read(path)
    assert all(isinstance(o, ImportedSuppression) for o in outcomes)
    assert len(outcomes) == 2


def test_a_substack_export_keeps_email_disabled_readers_out() -> None:
    export, outcomes = read(EXPORTS / "substack-email_list.csv")
    assert export.parts[0].label == "Substack"
    people = imported(outcomes)
    assert sorted(people) == ["Paid.Reader@example.net", "reader.one@example.org"]
    one = people["reader.one@example.org"].consent
    assert one.subscribed_at == dt.datetime(2021, 4, 5, 6, 7, 8, 123000, tzinfo=UTC)
    assert suppressed(outcomes)["quiet.reader@example.com"].reason == "email disabled"
    assert refused(outcomes) == [
        "erased: substack-email_list.csv:5: email: is Substack's stand-in for a reader who "
        "asked to be erased; not imported",
        "invalid: substack-email_list.csv:6: email_disabled: is 'perhaps'; expected true or false",
    ]


def test_substacks_dashboard_export_is_refused_for_it_cannot_tell_who_turned_email_off() -> None:
    with pytest.raises(ExportFileError, match="does not say who turned email off"):
        read_export(EXPORTS / "substack-dashboard.csv")


def test_a_ghost_export() -> None:
    _, outcomes = read(EXPORTS / "ghost-members.csv")
    people = imported(outcomes)
    assert list(people) == ["member.one@example.org"]
    assert people["member.one@example.org"].subscriber.name == "Member One"
    assert people["member.one@example.org"].consent.subscribed_at == dt.datetime(
        2024, 1, 15, 10, tzinfo=UTC
    )
    gone = suppressed(outcomes)
    assert gone["member.two@example.net"].reason == "unsubscribed"
    assert gone["member.four@example.org"].reason == "deleted"
    assert refused(outcomes) == [
        "invalid: ghost-members.csv:4: subscribed_to_emails: is ''; expected true or false"
    ]


def test_a_buttondown_export_reads_names_from_metadata_and_keeps_the_unconfirmed_out() -> None:
    _, outcomes = read(EXPORTS / "buttondown-subscribers.csv")
    people = imported(outcomes)
    liz = people["liz.lemon@example.org"]
    assert liz.subscriber.name == "Liz Lemon"  # from the Python dict the export writes
    assert people["jack.d@example.net"].subscriber.name == "Jack Donaghy"  # from JSON
    assert liz.consent.subscribed_ip == "198.51.100.181"
    assert liz.consent.subscribed_at == dt.datetime(2024, 3, 13, 0, 3, 9, 183465, tzinfo=UTC)
    assert ("referrer_url", "https://news.example.org/subscribe") in liz.consent.evidence
    gone = suppressed(outcomes)
    assert gone["kenneth@example.com"].at == dt.datetime(2024, 4, 8, 17, 9, 32, 596959, tzinfo=UTC)
    assert gone["angry@example.org"].reason == "complained"
    kinds = [o.kind for o in outcomes if isinstance(o, Refused)]
    assert kinds == ["unconfirmed", "invalid"]


def test_a_listmonk_export_reads_gos_time_format() -> None:
    _, outcomes = read(EXPORTS / "listmonk-subscribers.csv")
    first = imported(outcomes)["first.reader@example.org"]
    # 21:55:20.123456 +0530 IST is 16:25:20.123456 UTC.
    assert first.consent.subscribed_at == dt.datetime(2020, 4, 8, 16, 25, 20, 123456, tzinfo=UTC)
    gone = suppressed(outcomes)
    assert (gone["paused.reader@example.net"].reason, gone["spam.trap@example.com"].reason) == (
        "disabled",
        "blocklisted",
    )


def test_our_own_csv_round_trips_its_consent_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "email,name,status,subscribed_at,subscribed_ip,confirmed_at,confirmed_ip\n"
        "ann@example.org,Ann,,2025-01-02T03:04:05Z,192.0.2.1,2025-01-02T03:05:00Z,192.0.2.1\n"
        "bo@example.org,,unsubscribed,,,,\n",
    )
    export, outcomes = read(path)
    assert export.parts[0].tool == "csv"
    ann = imported(outcomes)["ann@example.org"].consent
    assert ann.confirmed_at == dt.datetime(2025, 1, 2, 3, 5, tzinfo=UTC)
    assert suppressed(outcomes)["bo@example.org"].reason == "unsubscribed"


# -- the format: detected, or given -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("mailchimp/subscribed_members_export_3f9c1a2b7d.csv", "mailchimp"),
        ("substack-email_list.csv", "substack"),
        ("ghost-members.csv", "ghost"),
        ("buttondown-subscribers.csv", "buttondown"),
        ("listmonk-subscribers.csv", "listmonk"),
    ],
)
def test_each_tool_is_told_from_its_header_and_can_be_named(name: str, tool: str) -> None:
    detected = read_export(EXPORTS / name)
    assert (detected.parts[0].tool, detected.parts[0].detected) == (tool, True)
    detected.close()
    given = read_export(EXPORTS / name, tool)
    assert (given.parts[0].tool, given.parts[0].detected) == (tool, False)
    assert "as --format said" in given.parts[0].describe()
    given.close()


def test_a_format_its_header_contradicts_is_refused_with_what_it_looks_like() -> None:
    with pytest.raises(ExportFileError) as caught:
        read_export(EXPORTS / "ghost-members.csv", "mailchimp")
    message = caught.value.message
    assert "a Mailchimp export has the column(s) email address, which this header lacks" in message
    assert "it looks like a Ghost export" in message
    with pytest.raises(ExportFileError, match="unknown format 'mailchump'"):
        read_export(EXPORTS / "ghost-members.csv", "mailchump")
    assert set(FORMATS) == {"mailchimp", "substack", "ghost", "buttondown", "listmonk", "csv"}


def test_a_header_no_tool_writes_is_refused_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ExportFileError) as caught:
        read_export(write(tmp_path, "mail,who\na@example.org,Ann\n"))
    assert "cannot tell which tool exported this file (its header: mail, who)" in str(caught.value)
    assert "--format mailchimp|substack|ghost|buttondown|listmonk|csv" in str(caught.value)


def test_unsubscribed_makes_every_row_a_suppression(tmp_path: Path) -> None:
    _, outcomes = read(EXPORTS / "listmonk-subscribers.csv", unsubscribed=True)
    assert [type(o) for o in outcomes] == [ImportedSuppression] * 3
    assert suppressed(outcomes)["first.reader@example.org"].reason == "unsubscribed"


# -- whole files that cannot be imported --------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "the file is empty"),
        (b"\n\n", "the file is empty"),
        (b'"email,name\nann@example.org,Ann\n', "the header row opens a double quote"),
        (b"em\xffail,name\n", "the header row is not valid UTF-8"),
        (b"email,email\nann@example.org,x\n", "column 'email' appears twice"),
    ],
)
def test_an_unusable_file_is_one_clear_error(tmp_path: Path, content: bytes, expected: str) -> None:
    with pytest.raises(ExportFileError, match=expected):
        read_export(write(tmp_path, content))


def test_a_missing_file_or_a_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ExportFileError, match="no such file"):
        read_export(tmp_path / "nope.csv")
    with pytest.raises(ExportFileError, match="is a folder"):
        read_export(tmp_path)


def test_a_zip_skips_what_is_no_export_and_says_so(tmp_path: Path) -> None:
    path = mailchimp_zip(
        tmp_path, ("posts.csv", "post_id,post_date,title\n1,2024-01-01,Hello\n"), ("notes.txt", "x")
    )
    export, _ = read(path)
    assert len(export.parts) == 3
    assert len(export.report.skipped) == 1
    assert "posts.csv: cannot tell which tool exported this file" in export.report.skipped[0]


def test_a_zip_with_nothing_to_import_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(
        ExportFileError, match="nothing in this ZIP can be imported: it holds no CSV"
    ):
        read_export(path)


@pytest.mark.slow
def test_a_zip_damaged_halfway_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    rows = "".join(f"reader{n}@example.org,R{n},\n" for n in range(20_000))
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("list.csv", "email,name,status\n" + rows)
    data = bytearray(good.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # inside the member's deflated data
    bad = write(tmp_path, bytes(data), "bad.zip")
    with pytest.raises(ExportFileError, match="is damaged") as caught:
        list(read_export(bad))
    assert "keep nothing of this import" in caught.value.message


# -- hostile rows: each refused with its line, the rest read ------------------------------------


def test_hostile_rows_are_refused_with_their_lines_and_the_rest_imported(tmp_path: Path) -> None:
    rows = [
        "email,name,status",
        "ok.one@example.org,One,",
        'inject@example.org,"Evil\r\nBcc: victim@example.org",',  # a header injection in the name
        "=?utf-8?q?x?=@example.org,Eve,",  # an encoded word
        "ann@example.org,Ann,maybe",
        "too@example.org,Too,,many,fields",
        '"unclosed@example.org,Quote,',
        "ok.two@example.org,Two,",
        "ann@example.org," + "x" * 201 + ",",
        "",
        "ok.three@example.org,Three,",
    ]
    path = write(tmp_path, "\n".join(rows) + "\n")
    export, outcomes = read(path)
    assert sorted(imported(outcomes)) == [
        "ok.one@example.org",
        "ok.three@example.org",
        "ok.two@example.org",
    ]
    lines = [o.problem.line for o in outcomes if isinstance(o, Refused)]
    assert lines == [3, 5, 6, 7, 8, 10]
    reasons = refused(outcomes)
    assert "could inject a mail header" in reasons[0]
    assert "name: is longer than 200 characters" in reasons[-1]
    assert "opens a double quote" in reasons[4]
    assert export.report.refused["invalid"] == 6


def test_a_row_that_is_not_utf8_is_refused_and_the_next_read(tmp_path: Path) -> None:
    path = write(tmp_path, b"email,name\nann@example.org,An\xe9\nbo@example.org,Bo\n")
    _, outcomes = read(path)
    assert refused(outcomes) == [f"invalid: {path}:2: is not valid UTF-8 (save the file as UTF-8)"]
    assert list(imported(outcomes)) == ["bo@example.org"]


def test_a_bom_and_crlf_lines_and_quoted_line_breaks_keep_line_numbers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '\ufeffEmail Address,First Name,Company,OPTIN_TIME\r\n"a@example.org",A,"Two\r\nLines",\r\n'
        "bad,Bad,,\r\n",
    )
    export, outcomes = read(path)
    assert export.parts[0].tool == "mailchimp"  # the BOM is not part of the first column's name
    assert imported(outcomes)["a@example.org"].subscriber.line == 2
    assert refused(outcomes)[0].startswith(f"invalid: {path}:4: Email Address:")


def test_a_suppression_wins_over_a_subscription_in_either_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "email,status\n"
        "first@example.org,\n"
        "first@example.org,unsubscribed\n"  # after: still handed on
        "second@example.org,unsubscribed\n"
        "Second@example.org,\n"  # before: the subscription is refused
        "second@example.org,unsubscribed\n",  # twice: a duplicate
    )
    _, outcomes = read(path)
    assert set(imported(outcomes)) == {"first@example.org"}
    assert set(suppressed(outcomes)) == {"first@example.org", "second@example.org"}
    assert refused(outcomes) == [
        f"duplicate: {path}:5: email: 'Second@example.org' is suppressed at line 4 of this "
        "import; not imported",
        f"duplicate: {path}:6: email: 'second@example.org' duplicates line 4",
    ]


@pytest.mark.slow
def test_an_export_is_read_in_memory_that_does_not_hold_its_rows(tmp_path: Path) -> None:
    """A large export streams: the outcomes come one at a time, the first before the last
    row is read (the file is still open), and duplicates are found across the whole file."""
    rows = "".join(f"reader{n}@example.org,R{n},\n" for n in range(50_000))
    path = write(tmp_path, "email,name,status\n" + rows + "reader7@example.org,Again,\n")
    export = read_export(path)
    stream = iter(export)
    first = next(stream)
    assert isinstance(first, Imported)
    assert first.subscriber.line == 2
    rest = list(stream)
    assert export.report.imported == 50_000
    assert refused(rest) == [
        f"duplicate: {path}:50002: email: 'reader7@example.org' duplicates line 9 "
        "(addresses compare case-insensitively)"
    ]


def test_the_importer_checks_addresses_exactly_as_the_lists_do(tmp_path: Path) -> None:
    """One validation for every way in: each hostile address gets the reason a list row gets."""
    cases = [
        "plainaddress",
        "a@b",
        "ann@exa mple.org",
        "ann@例子.测试",
        "ann..lee@example.org",
        '"quoted"@example.org',
        "ann@[192.0.2.1]",
        "x" * 65 + "@example.org",
    ]
    buffer = io.StringIO()
    csv.writer(buffer).writerows([["email"], *([c] for c in cases)])
    _, outcomes = read(write(tmp_path, buffer.getvalue()))
    for case, outcome in zip(cases, outcomes, strict=True):
        expected = check_entry(case, "")
        if isinstance(outcome, Refused):
            assert isinstance(expected, Refusal), case
            assert outcome.problem.message == expected.reason, case
        else:
            assert not isinstance(expected, Refusal), case
            assert isinstance(outcome, Imported), case
            assert outcome.subscriber.envelope == expected[0]
