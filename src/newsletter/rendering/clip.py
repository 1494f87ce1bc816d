"""Gmail's clip: an HTML part in; its size on the wire, each section's share, and where to cut.

Gmail hides everything of a message past ~102 KB of HTML, the footer and so the unsubscribe link
included. An issue that does not fit keeps all it can: it is cut between sections, items or the
blocks (paragraphs, code blocks, lists) of one item, never inside a block, and ends with a link
to the rest on its web page. render.py renders; these functions measure and say where to cut.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable

from newsletter.models import Issue

# Where a cut lands, as (section, item, block), each from 0: the first piece the email leaves
# out, everything before it in reading order kept. Item -1 is the section's intro.
Cut = tuple[int, int, int]
NOTHING: Cut = (0, -1, 0)  # the cut that keeps no piece of any section

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


def pieces(issue: Issue) -> list[Cut]:
    """Every place a cut may land, in reading order: before each block of a section's intro,
    before each item, and before each further block of an item (its title goes with its first
    block, its links row with its last, so no heading is left alone at the cut)."""
    found: list[Cut] = []
    for s, section in enumerate(issue.sections):
        found += [(s, -1, b) for b in range(len(section.intro))]
        for i, item in enumerate(section.items):
            found += [(s, i, b) for b in range(max(1, len(item.summary)))]
    return found


def kept_part(issue: Issue, cut: Cut) -> Issue:
    """`issue` with what comes before `cut` and nothing after it (the web version has it)."""
    s, i, b = cut
    sections = list(issue.sections[:s])
    section = issue.sections[s]
    if i < 0 and b:
        sections.append(section.model_copy(update={"intro": section.intro[:b], "items": []}))
    elif i >= 0:
        items = list(section.items[:i])
        if b:  # a long item, cut between its blocks: its links row is on the web version
            part = {"summary": section.items[i].summary[:b], "links": []}
            items.append(section.items[i].model_copy(update=part))
        sections.append(section.model_copy(update={"items": items}))
    return issue.model_copy(update={"sections": sections})


def last_that_fits(fits: Callable[[int], bool], count: int, guess: tuple[int, int]) -> int:
    """The largest n in [0, count) with fits(n), fits being true up to some n and false past
    it; -1 if none does. `guess` is a (low, high) range the answer is likely in: tried first,
    so that when it holds only the pieces inside it are searched."""
    low, high = -1, count  # fits(low) or low == -1; not fits(high) or high == count
    for bound in guess:
        if low < bound < high:
            low, high = (bound, high) if fits(bound) else (low, bound)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def kept_words(issue: Issue, cut: Cut) -> str:
    """What an email of `issue` cut at `cut` keeps, in words: "sections 1-2 and section 3 in
    part: its intro, 4 item(s) and 2 block(s) of item 5"."""
    section, item, block = cut
    whole = f"sections 1-{section}" if section > 1 else ("section 1" if section else "")
    part = [f"{block} block(s) of its intro"] if item < 0 and block else []
    if item >= 0:
        part = ["its intro"] if issue.sections[section].intro else []
        part += [f"{item} item(s)"] if item else []
        part += [f"{block} block(s) of item {item + 1}"] if block else []
    if not part:
        return whole or "nothing of any section"
    listed = ", ".join(part[:-1]) + " and " * (len(part) > 1) + part[-1]
    return f"{whole} and " * bool(whole) + f"section {section + 1} in part: {listed}"
