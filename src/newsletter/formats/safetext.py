"""Text from strangers in (server replies, list rows, mail headers); text safe to show out, on a
terminal line or in a spreadsheet cell.

A terminal acts on what it is sent: ESC starts a sequence that recolours, clears the screen,
retitles the window (OSC 0) or shows a link to another address than it reads (OSC 8), and
U+009B and U+009D are the one-character forms of CSI and OSC. Bidirectional controls make a
line show in another order than written. `printable` is the one cleaner every command's
output goes through.
"""

from __future__ import annotations

import re

# C0 controls and DEL, the C1 controls, the bidirectional marks, embeddings, overrides and
# isolates, the line and paragraph separators, and lone surrogates (text decoded with
# surrogateescape: unprintable, and a UnicodeEncodeError on a strict stream).
_UNSAFE = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
# Tab, line feed, vertical tab, form feed, carriage return: the line breaks of a multi-line
# reply become one space, so a line stays one line.
_BREAKS = re.compile("[\t-\r]+")


def printable(text: str) -> str:
    """`text` with every control character replaced by `?` and every run of line breaks and
    tabs by one space: nothing a terminal or a spreadsheet would act on, nothing that breaks
    the line, and the text around it still there to read."""
    return _UNSAFE.sub("?", _BREAKS.sub(" ", text))
