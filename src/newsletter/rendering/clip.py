"""Gmail's clip: an HTML part in; its size on the wire, each section's share, and where to cut.

Gmail hides everything of a message past ~102 KB of HTML, the footer and so the unsubscribe link
included. An issue that does not fit is cut at a section boundary and ends with a link to the
rest on its web page (render.py does the cut); these functions measure.
"""

from __future__ import annotations

import binascii

KB = 1024
GMAIL_CLIP = 102 * KB  # Gmail hides everything past ~102 KB of HTML, the footer included
# The email is cut so it stays under this: the clip, less room for each reader's own values
# (their name and links replace shorter placeholder words).
CUT_AT = GMAIL_CLIP - 2 * KB
# Below this no one asks where an issue's bytes go: its sections are not measured.
MEASURE_FROM = 64 * KB
# Each section's first element carries id="nl-sN" (N from 1), the web version's anchor too.
SECTION_ID = "nl-s{number}"
# Where the sections end in the HTML part: the footer's text block.
FOOTER_MARK = 'class="nl-text nl-footer"'


def wire_size(html: str) -> int:
    """Bytes the HTML part takes on the wire, CRLF line ends included: base64 or
    quoted-printable, whichever is smaller, as the message builder chooses."""
    data = html.encode()
    qp = binascii.b2a_qp(data, istext=True)
    base64 = (len(data) + 56) // 57 * 78
    return min(len(qp) + qp.count(b"\n"), base64)


def section_sizes(html: str, count: int, size: int | None = None) -> list[int]:
    """Each of the first `count` sections' share of `html`'s wire size (`size`, if measured
    already), in bytes: from its anchor to the next one's (the last one's to the footer, its
    outro included)."""
    starts = []
    for number in range(1, count + 1):
        mark = html.find(f'id="{SECTION_ID.format(number=number)}"')
        if mark < 0:
            return []  # a project template without the anchors: nothing to measure
        starts.append(html.rfind("<", 0, mark))
    footer = html.find(FOOTER_MARK)
    ends = [*starts[1:], html.rfind("<", 0, footer) if footer > 0 else len(html)]
    raw = len(html.encode())
    ratio = (wire_size(html) if size is None else size) / raw if raw else 1.0
    return [round(len(html[a:b].encode()) * ratio) for a, b in zip(starts, ends, strict=True)]


def sections_that_fit(whole: int, sizes: list[int], notice: int, budget: int = CUT_AT) -> int:
    """How many sections, from the first, fit in `budget` with `notice` bytes instead of the
    rest (`whole` is the size of the part with every section)."""
    total = whole - sum(sizes) + notice
    for kept, size in enumerate(sizes):
        if total + size > budget:
            return kept
        total += size
    return len(sizes)
