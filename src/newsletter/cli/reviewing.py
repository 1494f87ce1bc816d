"""`diff`: an issue at two git revisions, as its readers get it (review/ compares; this prints)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from newsletter.cli.terminal import issue_option, printable, sample_list_option
from newsletter.clip import GMAIL_CLIP
from newsletter.configfile import CONFIG_NAME
from newsletter.review import IssueDiff, Version, compare

PICTURES = "pictures: pip install 'newsletter[shots]' and --html FILE (not built yet)"
_LINK_MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}


@click.command()
@issue_option
@click.argument("revisions", nargs=-1, metavar="[REV] [REV]")
@sample_list_option
@click.pass_context
def diff(ctx: click.Context, number: int, revisions: tuple[str, ...], list_name: str) -> None:
    """What changes for readers of an issue between two git revisions: the text part as a
    unified diff, the links added, removed and changed (by item), the subject, the preheader,
    the HTML part's size against Gmail's clip, and the check findings, before and after.

    \b
    newsletter diff --issue 14                 the last commit against the working tree
    newsletter diff --issue 14 main            main against the working tree
    newsletter diff --issue 14 main HEAD       any two revisions

    Both versions are read from git (nothing is checked out), each with the templates,
    newsletter.toml and images it had. Colour on a terminal; NO_COLOR turns it off.
    """
    if len(revisions) > 2:
        raise click.UsageError("at most two revisions: diff --issue N [REV] [REV]")
    config = ctx.find_root().ensure_object(dict).get("config") or Path(CONFIG_NAME)
    rev_a = revisions[0] if revisions else "HEAD"
    rev_b = revisions[1] if len(revisions) == 2 else None
    found = compare(
        config.resolve().parent, number, rev_a, rev_b, config_name=config.name, list_name=list_name
    )
    colour = False if os.environ.get("NO_COLOR") else None  # None: click's tty test
    for line, style in diff_lines(found):
        click.echo(
            click.style(printable(line), fg=style) if style else printable(line), color=colour
        )


def diff_lines(found: IssueDiff) -> list[tuple[str, str | None]]:
    """The report's lines, each with its colour (None: plain)."""
    before, after = found.before, found.after
    lines: list[tuple[str, str | None]] = [
        (f"issue {found.number}: {before.label} -> {after.label}", None)
    ]
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
    if found.text_diff:
        lines += [(line, _diff_colour(line)) for line in found.text_diff]
    else:
        lines.append(("text part: unchanged", None))
    lines.append((PICTURES, None))
    return lines


def _pair(name: str, old: str, new: str) -> tuple[str, str | None]:
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
