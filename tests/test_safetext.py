"""The one cleaner of text from strangers (safetext.printable) and the CSV of `status --csv`
(spreadsheet.py): each control sequence a server reply can carry, and what is left to read."""

from __future__ import annotations

import csv
import io

import pytest

from newsletter.database import Delivery
from newsletter.formats.safetext import printable
from newsletter.models import DeliveryStatus
from newsletter.spreadsheet import CSV_COLUMNS, write_csv


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # A colour (CSI ... m): ESC goes, the rest is inert text.
        ("\x1b[31mred\x1b[0m", "?[31mred?[0m"),
        # A window title (OSC 0, ended by BEL).
        ("\x1b]0;owned\x07", "?]0;owned?"),
        # A hyperlink to another address than it reads (OSC 8, ended by ESC \).
        (
            "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
            "?]8;;https://evil.example/?\\click?]8;;?\\",
        ),
        # The screen cleared and the cursor sent home.
        ("\x1b[2J\x1b[H", "?[2J?[H"),
        # The one-character C1 forms: CSI (U+009B), OSC (U+009D), ST (U+009C), NEL (U+0085).
        ("\u009b31mred", "?31mred"),
        ("\u009d0;owned\u009c", "?0;owned?"),
        ("a\u0085b", "a?b"),
        # NUL, backspace (overwrites what was shown), DEL.
        ("a\x00b\x08c\x7f", "a?b?c?"),
        # Bidirectional overrides, isolates and marks: the line would read in another order.
        ("\u202egnp.exe", "?gnp.exe"),
        ("\u2066a\u2069 \u200f\u061c", "?a? ??"),
        # Line and paragraph separators.
        ("a\u2028b\u2029c", "a?b?c"),
        # A lone surrogate (surrogateescape): unprintable, and an error on a strict stream.
        ("Empf\udce4nger", "Empf?nger"),
        # A multi-line reply stays on one line.
        ("5.1.1 first\n5.1.1 second\r\n\tthird", "5.1.1 first 5.1.1 second third"),
    ],
)
def test_every_control_is_replaced_and_the_text_around_it_kept(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(shown) == shown  # cleaning twice changes nothing


def test_what_is_text_passes_as_it_is() -> None:
    text = "550 5.1.1 Empfänger unbekannt \ufffd 收件人不存在 — ‘quoted’ 🙂 ZWJ\u200d \u3000 end"
    assert printable(text) == text


def row(recipient: str, reply: str) -> Delivery:
    return Delivery(
        id=1,
        issue=14,
        list="main",
        recipient=recipient,
        message_id="<m1@example.org>",
        state=DeliveryStatus.REJECTED,
        attempts=1,
        smtp_code=550,
        smtp_reply=reply,
        created_at="2024-01-01 00:00:00",
        updated_at="2024-01-01 00:00:00",
        sent_at=None,
        next_attempt_at=0.0,
    )


@pytest.mark.parametrize(
    ("reply", "cell"),
    [
        ("5.7.1 \x1b]0;owned\x07 title", "5.7.1 ?]0;owned? title"),
        (
            "5.7.1 \x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\",
            "5.7.1 ?]8;;https://evil.example/?\\here?]8;;?\\",
        ),
        ("5.7.1 \u009b2J \u009d0;x\u009c", "5.7.1 ?2J ?0;x?"),
        ("5.1.1 line one\n5.1.1 line two", "5.1.1 line one 5.1.1 line two"),
        # Neutralised on the text as it came, then cleaned: the tab is still seen as a lead.
        ("\t=HYPERLINK(1)", "' =HYPERLINK(1)"),
        ("=1+1", "'=1+1"),
    ],
)
def test_the_csv_holds_no_control_character_and_no_formula(reply: str, cell: str) -> None:
    out = io.StringIO()
    assert write_csv([row("-a\x1b[2J@example.com", reply)], out) == 1
    written = out.getvalue()
    assert "\x1b" not in written
    assert not any("\x80" <= ch <= "\x9f" for ch in written)
    rows = list(csv.reader(io.StringIO(written)))
    assert rows[0] == list(CSV_COLUMNS)
    assert len(rows) == 2  # one row: a multi-line reply is one line too
    cells = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert cells["smtp_reply"] == cell
    assert cells["recipient"] == "'-a?[2J@example.com"
