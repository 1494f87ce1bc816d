"""A text file's first bytes in; whether they are UTF-16 rather than UTF-8 out.

Excel's "Unicode Text" and Windows editors save UTF-16, often without a byte-order mark. Read as
UTF-8 such a file does not fail: ASCII letters come out with a NUL between each two, so a list's
header reads `e?m?a?i?l?` and an issue file's first line is no YAML at all. Told apart here, the
file is named as what it is, with the fix (save it as UTF-8), before anything parses it.
"""

from __future__ import annotations

UTF16 = "is not UTF-8 text (it looks like UTF-16): save it as UTF-8"
SAVE_AS_UTF8 = (
    'Save it again with the UTF-8 encoding (a text editor\'s "Save as"; in Excel, "CSV UTF-8").'
)
_BOMS = (b"\xff\xfe", b"\xfe\xff")
_SAMPLE = 4096  # bytes looked at: a header row or a file's first lines


def looks_like_utf16(head: bytes) -> bool:
    """A UTF-16 byte-order mark, or NULs in a third or more of the even or the odd bytes (the
    high bytes of Latin letters, digits and punctuation): UTF-8 text has no NULs at all."""
    if head.startswith(_BOMS):
        return True
    sample = head[:_SAMPLE]
    if len(sample) < 2:
        return False
    halves = (sample[0::2], sample[1::2])
    return any(half.count(0) * 3 >= len(half) for half in halves)
