"""A hostile SMTP server's reply text against `newsletter send` and `status`, as a user runs
them: bytes that are not UTF-8, raw and encoded C1 controls, NUL, and terminal escape
sequences (issue 18, points 2 and 10). Real processes, a real aiosmtpd server on loopback, the
SQLite and the PostgreSQL outbox."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.models import DeliveryStatus
from support.sendcli import Done, environment, newsletter, write_list
from support.smtp import Fault, FaultyHandler, start

# What no line written to a terminal or a CSV file may hold: C0 controls (ESC, BEL, NUL, CR,
# LF inside a line), DEL, C1 controls (U+009B is CSI, U+009D is OSC, U+009C ST), a lone
# surrogate, and the replacement of an undecodable byte stays visible.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")

# recipient -> the bytes its RCPT gets, and the reply text the log must hold for it.
HOSTILE: dict[str, tuple[bytes, str]] = {
    # A real German server's reply, in Latin-1.
    "reader00001@example.com": (
        b"550 5.1.1 Empf\xe4nger unbekannt",
        "5.1.1 Empf\ufffdnger unbekannt",
    ),
    # Raw C1 bytes (CSI, OSC, ST), not UTF-8 either.
    "reader00002@example.com": (
        b"550 5.1.1 \x9b31m\x9d0;title\x9c gone",
        "5.1.1 \ufffd31m\ufffd0;title\ufffd gone",
    ),
    # NUL (PostgreSQL text cannot hold it) and an unfinished UTF-8 sequence.
    "reader00003@example.com": (b"550 5.1.1 nul\x00here \xe6\x97", "5.1.1 nul\ufffdhere \ufffd"),
}


@pytest.fixture(params=["sqlite", "postgres"])
def outbox_url(request: pytest.FixtureRequest) -> str:
    """[outbox] url: empty for the SQLite file in .newsletter/."""
    if request.param == "sqlite":
        return ""
    url: str = request.getfixturevalue("postgres_url")
    return url


def csv_part(out: str) -> list[dict[str, str]]:
    """The rows `status --csv -` wrote after its own lines."""
    start = out.index("recipient,state,")
    return list(csv.DictReader(io.StringIO(out[start:])))


def assert_clean(*done: Done) -> None:
    for d in done:
        assert "Traceback" not in d.err, d.err
        for line in (d.out + d.err).splitlines():
            assert not _CONTROLS.search(line), repr(line)


@pytest.mark.slow
async def test_a_reply_that_is_not_utf8_is_recorded_rejected_and_the_run_goes_on(
    project: Path, outbox_url: str
) -> None:
    write_list(project / "big.csv", 5)
    handler = FaultyHandler(
        [
            Fault("rcpt", reply=raw, match=lambda r, a=address: r == a)
            for address, (raw, _) in HOSTILE.items()
        ]
    )
    async with start(handler) as server:
        env = environment(
            server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv", NEWSLETTER_OUTBOX__URL=outbox_url
        )
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        status = await newsletter(["status", "--issue", "14", "--csv", "-"], env, project)
        again = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert_clean(done, status, again)
    assert done.code == 3, done.err
    assert "2 sent, 3 rejected" in done.out
    assert "rejected: reader00001@example.com 550 5.1.1 Empf\ufffdnger unbekannt" in done.out
    with open_database(outbox_url or project / ".newsletter" / "outbox.sqlite3") as database:
        rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
        hard = database.bounces.counts(14, "main").get("hard", 0)
        suppressed = database.suppressions.addresses("main")
    for address, (_, text) in HOSTILE.items():
        assert (rows[address].state, rows[address].smtp_code) == (DeliveryStatus.REJECTED, 550)
        assert rows[address].smtp_reply == text
    # The refusal at send time is a bounce like any other: recorded, and 5.1.1 suppresses.
    assert hard == 3
    assert suppressed == set(HOSTILE)
    assert status.code == 0, status.err
    assert "rejected  reader00001@example.com  550 5.1.1 Empf\ufffdnger unbekannt" in status.out
    assert "bounced   3 (60.0% of 5 answered)" in status.out
    cells = {r["recipient"]: r["smtp_reply"] for r in csv_part(status.out)}
    assert cells["reader00003@example.com"] == "5.1.1 nul\ufffdhere \ufffd"
    # The re-run finds nothing to send: rejected rows are done, nobody was sent twice.
    assert again.code == 3, again.err
    assert sorted(handler.by_recipient.values()) == [1, 1]
    assert sum(sum(f.used.values()) for f in handler.faults) == 3


# Each escape a reply can carry to the terminal that shows it or the spreadsheet that opens
# the CSV: a colour (CSI), a window title (OSC 0, ended by BEL), a hyperlink (OSC 8, ended by
# ESC \), a screen clear, and the single-character C1 forms of CSI and OSC (U+009B, U+009D).
ESCAPES = {
    "csi": "\x1b[31mred\x1b[0m",
    "title": "\x1b]0;owned\x07",
    "link": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "clear": "\x1b[2J\x1b[H",
    "c1-csi": "\u009b31mred",
    "c1-osc": "\u009d0;owned\u009c",
    "bidi": "\u202egnp.exe",
}


@pytest.mark.slow
async def test_control_sequences_in_replies_reach_no_terminal_and_no_csv(project: Path) -> None:
    names = list(ESCAPES)
    write_list(project / "big.csv", len(names))
    handler = FaultyHandler(
        [
            Fault(
                "rcpt",
                reply=f"550 5.7.1 {ESCAPES[name]} {name}".encode(),
                match=lambda r, i=i: r == f"reader{i:05d}@example.com",
            )
            for i, name in enumerate(names)
        ]
    )
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        status = await newsletter(["status", "--issue", "14", "--csv", "-"], env, project)
        await newsletter(["status", "--issue", "14", "--csv", "log.csv"], env, project)
    assert done.code == 3, done.err
    assert_clean(done, status)
    assert "\u202e" not in done.out + status.out
    written = (project / "log.csv").read_text(encoding="utf-8")
    assert not _CONTROLS.search(written.replace("\r\n", "")), repr(written)
    assert "\u202e" not in written
    cells = {r["recipient"]: r["smtp_reply"] for r in csv_part(status.out)}
    for i, name in enumerate(names):
        # The text around each escape is still there to read, in the log and on screen.
        assert cells[f"reader{i:05d}@example.com"].endswith(f" {name}")
        assert f"rejected: reader{i:05d}@example.com 550 5.7.1 " in done.out
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        kept = {r.recipient: r.smtp_reply for r in database.deliveries.rows(14, "main")}
    # The log keeps what the server said; only what is shown is cleaned.
    assert kept["reader00001@example.com"] == f"5.7.1 {ESCAPES['title']} title"


@pytest.mark.slow
async def test_a_hostile_greeting_is_one_clean_error_line(project: Path) -> None:
    """The refusal stops the run before anything is planned: exit 1, the server's words in
    the error line, decoded and cleaned (it was a UnicodeEncodeError traceback)."""

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"554 5.7.1 Zugang f\xfcr \x1b]0;owned\x07 Sie \x9b2J verweigert\r\n")
        await reader.read(4096)
        writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        done = await newsletter(["send", "--issue", "14", "--yes"], environment(port), project)
    finally:
        server.close()
    assert done.code == 1, done.err
    assert_clean(done)
    assert (
        "the server refused the session at connect: 554 5.7.1 Zugang f\ufffdr ?]0;owned? Sie"
        " \ufffd2J verweigert" in done.err
    )
