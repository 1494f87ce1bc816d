"""An IssueDiff in; its report as lines out, each with a colour: what the terminal prints and
what the HTML page (review/page.py) shows beside the screenshots, in one place."""

from __future__ import annotations

from newsletter.rendering.clip import GMAIL_CLIP
from newsletter.review.compare import IssueDiff, Version

_LINK_MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}
Line = tuple[str, str | None]  # the text and its colour (None: plain)


def summary_lines(found: IssueDiff) -> list[Line]:
    """The heading, subject, preheader, size, findings and links."""
    before, after = found.before, found.after
    lines: list[Line] = [(f"issue {found.number}: {before.label} -> {after.label}", None)]
    lines += [
        _pair("subject", before.subject, after.subject),
        _pair("preheader", before.preheader, after.preheader),
        _pair("size", _size(before), _size(after)),
    ]
    if before.html != after.html and before.text == after.text:
        lines.append(("HTML part: changed (the text part did not)", "yellow"))
    counts = f"{_tally(before)} -> {_tally(after)}"
    lines.append((f"findings: {counts}", None))
    lines += [(f"  - {f}", "green") for f in found.findings_gone]
    lines += [(f"  + {f}", "red") for f in found.findings_new]
    kinds = [c.kind for c in found.links]
    lines.append(
        (
            f"links: {kinds.count('changed')} changed, {kinds.count('added')} added, "
            f"{kinds.count('removed')} removed",
            None,
        )
    )
    for change in found.links:
        mark, colour = _LINK_MARKS[change.kind]
        urls = " -> ".join(u for u in (change.before, change.after) if u is not None)
        lines.append((f"  {mark} [{change.label}] {urls}", colour))
    return lines


def text_diff_lines(found: IssueDiff) -> list[Line]:
    """The text part's unified diff, or one line saying it did not change."""
    if not found.text_diff:
        return [("text part: unchanged", None)]
    return [(line, _diff_colour(line)) for line in found.text_diff]


def diff_lines(found: IssueDiff) -> list[Line]:
    """The whole report as the terminal prints it."""
    return summary_lines(found) + text_diff_lines(found)


def _pair(name: str, old: str, new: str) -> Line:
    if old == new:
        return f"{name}: {new} (unchanged)", None
    return f"{name}: {old} -> {new}", "yellow"


def _size(version: Version) -> str:
    # In bytes: a word's edit moves the size by less than the tenth of a KB `check` shows.
    size = version.html_size
    return f"{size:,} bytes of HTML ({size / GMAIL_CLIP:.0%} of Gmail's ~102 KB clip)"


def _tally(version: Version) -> str:
    errors = sum(1 for f in version.findings if f.startswith("error:"))
    return f"{errors} errors, {len(version.findings) - errors} warnings"


def _diff_colour(line: str) -> str | None:
    if line.startswith(("+++", "---")):
        return None
    if line.startswith("@@"):
        return "cyan"
    return {"+": "green", "-": "red"}.get(line[:1])
