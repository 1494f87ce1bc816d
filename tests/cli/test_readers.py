"""`newsletter subscribers add|remove|import|export|forget|show`: Mailchimp's and Substack's
exports imported with their consent, the person's whole record, the erasure and what it keeps,
an export that imports back, and a clear error (never a traceback) for every bad input."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from newsletter.cli.main import cli
from newsletter.database import open_database
from newsletter.database.consent import ConsentLedger
from newsletter.database.roster import Roster, Status

SECRET = "cli-test-secret-0123456789abcdef"
EXPORTS = Path(__file__).resolve().parents[1] / "data" / "exports"


def run(project: Path, *args: str, secret: bool = True) -> Result:
    env = {"NEWSLETTER_SECRET": SECRET} if secret else {}
    return CliRunner().invoke(cli, ["--config", str(project / "newsletter.toml"), *args], env=env)


def _database(project: Path) -> Path:
    return project / ".newsletter" / "outbox.sqlite3"


def _mailchimp_zip(folder: Path) -> Path:
    path = folder / "mailchimp-audience.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for member in sorted((EXPORTS / "mailchimp").iterdir()):
            archive.write(member, f"audience/{member.name}")
    return path


def test_a_mailchimp_export_imports_with_its_consent(project: Path) -> None:
    export = _mailchimp_zip(project)
    result = run(project, "subscribers", "import", str(export))
    assert "Mailchimp export (detected from its header)" in result.output
    with open_database(_database(project)) as database:
        backend = database.backend
        ada = Roster(backend).get("main", "ada.lovelace@example.org")
        assert ada is not None
        assert ada.status is Status.CONFIRMED
        assert ada.name == "Ada Lovelace"
        assert ada.confirmed_at == "2019-03-02T09:17:02+00:00"
        (event,) = ConsentLedger(backend).of("ada.lovelace@example.org")
        assert event.event == "import"
        assert event.ip == "198.51.100.0/24"  # as [privacy] ip keeps a signup's: truncated
        assert event.evidence["tool"] == "mailchimp"
        assert event.evidence["subscribed_at"] == "2019-03-02T09:15:27+00:00"
        assert event.evidence["columns"]["OPTIN_IP"] == "198.51.100.0/24"
        assert event.evidence["columns"]["LEID"] == "118244031"
        # Unsubscribed and cleaned rows are suppressions, never recipients.
        assert database.suppressions.get("main", "edsger@example.org").source == "imported"  # type: ignore[union-attr]
        assert database.suppressions.contains("main", "gone.mailbox@example.com")
        assert Roster(backend).get("main", "edsger@example.org") is None
        (unsub,) = ConsentLedger(backend).of("edsger@example.org")
        assert unsub.event == "unsubscribe"
        assert unsub.evidence["reason"] == "unsubscribed"
    (summary,) = [line for line in result.output.splitlines() if "row(s):" in line]
    assert summary.endswith(
        "9 row(s): imported 4 subscriber(s) (4 new, 0 already there), 3 suppressed (3 new),"
        " 2 refused (1 duplicate, 1 invalid)"
    )
    assert result.exit_code == 1  # an invalid row: fix it and import again
    assert "subscribed_members_export_3f9c1a2b7d.csv:5: Email Address:" in result.output


def test_a_substack_export_imports_with_its_consent_and_refuses_the_erased(
    project: Path,
) -> None:
    result = run(project, "subscribers", "import", str(EXPORTS / "substack-email_list.csv"))
    assert "Substack export" in result.output
    # Refused, each with its line: the erased reader's stand-in, a flag that is no flag.
    assert "substack-email_list.csv:5: email: is Substack's stand-in for a reader" in result.output
    assert "substack-email_list.csv:6: email_disabled: is 'perhaps'" in result.output
    assert "5 row(s): imported 2 subscriber(s)" in result.output
    with open_database(_database(project)) as database:
        backend = database.backend
        reader = Roster(backend).get("main", "reader.one@example.org")
        assert reader is not None
        assert reader.status is Status.CONFIRMED
        (event,) = ConsentLedger(backend).of("reader.one@example.org")
        assert event.evidence["subscribed_at"] == "2021-04-05T06:07:08+00:00"
        assert event.evidence["columns"]["created_at"] == "2021-04-05T06:07:08.123Z"
        assert database.suppressions.get("main", "quiet.reader@example.com") is not None
        assert Roster(backend).get("main", "quiet.reader@example.com") is None


def test_an_import_adds_up_and_runs_twice_without_doubling(project: Path) -> None:
    export = _mailchimp_zip(project)
    first = run(project, "subscribers", "import", str(export))
    second = run(project, "subscribers", "import", str(export))
    assert "(4 new, 0 already there), 3 suppressed (3 new)" in first.output
    assert "(0 new, 4 already there), 3 suppressed (0 new)" in second.output
    with open_database(_database(project)) as database:
        counts = database.roster.counts("main")
        events = len(database.consent.of("ada.lovelace@example.org"))
    assert counts[Status.CONFIRMED] == 4
    assert events == 2  # each import is on the record


def test_a_dry_run_imports_nothing(project: Path) -> None:
    result = run(project, "subscribers", "import", str(_mailchimp_zip(project)), "--dry-run")
    assert "would import 4 subscriber(s)" in result.output
    with open_database(_database(project)) as database:
        assert database.roster.counts("main")[Status.CONFIRMED] == 0
        assert not database.suppressions.all("main")


def test_a_dry_run_counts_what_the_import_then_does(project: Path) -> None:
    # Issue 29, point 14: after the editor suppressed one of the file's unsubscribed people and
    # another was erased on request, a dry run promised their suppressions ("3 new"), which the
    # import then skipped. Both now run the same decisions: the same line, word for word.
    export = _mailchimp_zip(project)
    assert run(project, "unsubscribe", "edsger@example.org").exit_code == 0
    forgot = run(project, "subscribers", "forget", "gone.mailbox@example.com", "--yes")
    assert forgot.exit_code == 0, forgot.output
    with open_database(_database(project)) as database:
        before = (database.suppressions.all("main"), database.consent.of("edsger@example.org"))
    dry = run(project, "subscribers", "import", str(export), "--dry-run")
    with open_database(_database(project)) as database:
        after = (database.suppressions.all("main"), database.consent.of("edsger@example.org"))
        assert database.roster.counts("main")[Status.CONFIRMED] == 0
    assert after == before  # the dry run wrote nothing
    real = run(project, "subscribers", "import", str(export))
    (promised,) = [line for line in dry.output.splitlines() if "row(s):" in line]
    (done,) = [line for line in real.output.splitlines() if "row(s):" in line]
    assert promised.replace("would import", "imported") == done
    assert "3 suppressed (1 new)" in done
    assert dry.exit_code == real.exit_code == 1  # the file's one invalid row, both times


@pytest.mark.slow
def test_a_zip_damaged_halfway_imports_nothing(project: Path) -> None:
    # The audience's files first, then a long member damaged in its middle: rows of the first
    # files were read (and would have been written) before the damage shows.
    header = (EXPORTS / "mailchimp" / "subscribed_members_export_3f9c1a2b7d.csv").read_text()
    rows = "".join(f"r{n}@example.org,R,{n}" + "," * 18 + "\n" for n in range(20_000))
    broken = project / "broken.zip"
    with zipfile.ZipFile(broken, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in sorted((EXPORTS / "mailchimp").iterdir()):
            archive.write(member, member.name)
        archive.writestr("zz_more_members_export.csv", header.splitlines()[0] + "\n" + rows)
    data = bytearray(broken.read_bytes())
    middle = len(data) * 3 // 4
    data[middle : middle + 64] = bytes(64)
    broken.write_bytes(bytes(data))
    result = run(project, "subscribers", "import", str(broken))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "is damaged" in result.output
    assert "nothing was imported" in result.output
    with open_database(_database(project)) as database:
        assert database.roster.counts("main")[Status.CONFIRMED] == 0
        assert not database.suppressions.all("main")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "missing.csv"], "missing.csv: no such file"),
        (["import", "."], "is a folder"),
        (["import", "notes.txt"], "cannot tell which tool exported this file"),
        (["import", "notes.txt", "--format", "ghost"], "a Ghost export has the column(s)"),
        (["import", "notes.txt", "--list", "nope"], "no list named 'nope'"),
        (["add", "not an address"], "not a valid address"),
        (["add", "a@example.org", "--name", "Bad\nName"], "name"),
        (["remove", "nobody@example.org"], "is not a subscriber of 'main'"),
        (["show", "nobody@@example.org"], "not a valid address"),
    ],
)
def test_bad_input_gets_a_clear_error(project: Path, args: list[str], message: str) -> None:
    (project / "notes.txt").write_text("title,body\nhello,world\n", encoding="utf-8")
    result = run(project, "subscribers", *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_add_remove_show_and_export_round_trip(project: Path) -> None:
    assert (
        "added to 'main'"
        in run(project, "subscribers", "add", "Ann@Example.org", "--name", "Ann").output
    )
    assert "was already on 'main'" in run(project, "subscribers", "add", "ann@example.org").output
    run(project, "subscribers", "add", "bob@example.org")
    assert "removed" in run(project, "subscribers", "remove", "bob@example.org").output
    shown = run(project, "subscribers", "show", "ann@example.org")
    assert "list main: confirmed (cli)" in shown.output
    assert "add" in shown.output
    record = json.loads(run(project, "subscribers", "show", "ann@example.org", "--json").output)
    assert record["lists"][0]["status"] == "confirmed"
    assert [e["event"] for e in record["consent"]] == ["add"]
    out = project / "main.csv"
    exported = run(project, "subscribers", "export", "--out", str(out))
    assert "2 subscriber(s) of 'main' exported" in exported.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert [(r["email"], r["status"]) for r in rows] == [
        ("ann@example.org", "subscribed"),  # as the editor last wrote it
        ("bob@example.org", "unsubscribed"),
    ]
    assert rows[0]["name"] == "Ann"
    assert rows[0]["confirmed_at"]
    # The export is this tool's CSV: it imports back into another list.
    back = run(project, "subscribers", "import", str(out), "--list", "staging")
    assert "newsletter CSV export" in back.output
    with open_database(_database(project)) as database:
        assert database.roster.get("staging", "ann@example.org") is not None
        assert database.suppressions.contains("staging", "bob@example.org")


def test_the_report_counts_the_subscribers_in_the_outbox(project: Path) -> None:
    run(project, "subscribers", "add", "ann@example.org", "--list", "staging")
    result = run(project, "subscribers", "--list", "staging")
    assert result.exit_code == 0, result.output
    assert "staging (staging.example.csv): 2 valid" in result.output
    assert "staging (subscribers in the outbox): 0 pending, 1 confirmed, 0 left" in result.output


def test_forget_erases_and_says_what_it_kept(project: Path) -> None:
    run(project, "subscribers", "add", "ann@example.org", "--name", "Ann Lee")
    run(project, "unsubscribe", "ann@example.org", "--list", "staging")
    done = run(project, "subscribers", "forget", "ann@example.org", "--yes")
    assert done.exit_code == 0, done.output
    # The consent events: the editor's add, and the editor's unsubscribe from staging.
    assert "ann@example.org erased: 1 subscription(s), 2 consent event(s)" in done.output
    assert "1 suppression(s)" in done.output
    assert "kept: a keyed hash of the address" in done.output
    shown = run(project, "subscribers", "show", "ann@example.org")
    assert "erased on request" in shown.output
    assert "Ann Lee" not in shown.output
    again = run(project, "subscribers", "add", "ann@example.org")
    assert again.exit_code == 1
    assert "was erased on request" in again.output
    assert "forget --undo" in again.output
    assert run(project, "subscribers", "forget", "ann@example.org", "--undo").exit_code == 0
    assert "added to 'main'" in run(project, "subscribers", "add", "ann@example.org").output


def test_forget_needs_the_secret_and_a_yes(project: Path) -> None:
    no_secret = run(project, "subscribers", "forget", "ann@example.org", "--yes", secret=False)
    assert no_secret.exit_code == 1
    assert "NEWSLETTER_SECRET" in no_secret.output
    unasked = run(project, "subscribers", "forget", "ann@example.org")
    assert unasked.exit_code == 1
    assert "without confirmation" in unasked.output


def test_an_import_refuses_forgotten_and_departed_people(project: Path) -> None:
    source = project / "list.csv"
    source.write_text("email,name\nann@example.org,Ann\nbob@example.org,Bob\n", encoding="utf-8")
    run(project, "subscribers", "add", "bob@example.org")
    run(project, "subscribers", "remove", "bob@example.org")
    run(project, "subscribers", "forget", "ann@example.org", "--yes")
    result = run(project, "subscribers", "import", str(source))
    assert "list.csv:2: this person was erased on request" in result.output
    assert "list.csv:3: left 'main' here on" in result.output
    assert "2 left or erased here" in result.output


def test_a_list_without_a_csv(project: Path) -> None:
    config = project / "newsletter.toml"
    config.write_text(
        config.read_text() + '\n[lists.signups]\nname = "Signups"\nsignup = true\n',
        encoding="utf-8",
    )
    run(project, "subscribers", "add", "ann@example.org", "--list", "signups")
    result = run(project, "subscribers", "--list", "signups")
    assert result.exit_code == 0, result.output
    assert (
        result.output.strip()
        == "signups (subscribers in the outbox): 0 pending, 1 confirmed, 0 left"
    )
    shutil.rmtree(project / ".newsletter")
    empty = run(project, "subscribers", "--list", "signups")
    assert "0 pending, 0 confirmed, 0 left" in empty.output


def test_an_import_with_a_line_too_long_refuses_that_row_only(project: Path) -> None:
    from newsletter.formats.csvfile import MAX_LINE

    export = project / "export.csv"
    export.write_bytes(
        b"email,name\na@example.org,A\n"
        + b"b@example.org,"
        + b"x" * (MAX_LINE * 48)
        + b"\n"
        + b"c@example.org,C\n"
    )
    result = run(project, "subscribers", "import", str(export))
    assert result.exit_code == 1  # a refused row
    assert "Traceback" not in result.output
    assert f"export.csv:3: is longer than {MAX_LINE:,} characters" in result.output
    assert "3 row(s): imported 2 subscriber(s) (2 new, 0 already there)" in result.output
    assert "1 refused (1 invalid)" in result.output
    with open_database(_database(project)) as database:
        assert database.roster.counts("main")[Status.CONFIRMED] == 2


def test_a_utf16_export_is_named_as_such(project: Path) -> None:
    export = project / "export.csv"
    export.write_bytes("email,name\na@example.org,A\n".encode("utf-16-be"))
    result = run(project, "subscribers", "import", str(export))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "export.csv is not UTF-8 text (it looks like UTF-16): save it as UTF-8" in result.output
    assert "column" not in result.output
