"""Pre-send checks on an Issue alone (the CLI tests run them on a whole message)."""

from __future__ import annotations

from newsletter.checks import check_bidi
from newsletter.models import Issue, Item, Section


def test_a_bidi_override_in_a_title_is_flagged_with_its_code_point() -> None:
    # issue 13.10: RTL override characters in titles passed unflagged.
    items = [Item(title="gnp.\u202eexe"), Item(title="שלום עולם")]
    issue = Issue(number=1, title="T", sections=[Section(title="a\u2067b\u2069", items=items)])
    assert [str(f) for f in check_bidi(issue)] == [
        "warning: the title 「a<U+2067>b<U+2069>」 contains a bidirectional control, "
        "which shows the text in another order than it is written [bidi]",
        "warning: the title 「gnp.<U+202E>exe」 contains a bidirectional control, "
        "which shows the text in another order than it is written [bidi]",
    ]
