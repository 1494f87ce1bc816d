"""`check --archive`: the published issues' dead links, by issue and item (preflight/archive.py)."""

from __future__ import annotations

import click

from newsletter.cli.terminal import printable
from newsletter.config.settings import Settings
from newsletter.preflight.archive import check_archive


def report_archive(settings: Settings) -> int:
    """Print what check_archive found; the exit code: 1 if a link is dead (or nothing could be
    fetched), else 0."""
    found = check_archive(settings)
    for line in found.unreadable:
        click.secho(printable(f"error: {line}"), fg="red")
    if found.skipped:
        click.echo(printable(f"archive links not checked: {found.skipped}"))
        return 1
    for issue in found.issues:
        if not issue.findings and not issue.known_dead:
            continue
        click.echo(f"issue {issue.number}:")
        for finding in issue.findings:
            colour = "red" if finding.level == "error" else "yellow"
            click.secho(printable(f"  {finding}"), fg=colour)
        for url, label, replacement in issue.known_dead:
            now = f" (now at {replacement})" if replacement else ""
            click.echo(printable(f"  known dead (marked in the issue file): {label}: {url}{now}"))
    cached = found.urls - found.fetched  # or skipped ([check] link_skip): not asked either
    known = f", {found.known_dead} known dead" if found.known_dead else ""
    click.echo(
        f"archive: {len(found.issues)} published issue(s), {found.urls} link(s) "
        f"({found.fetched} fetched, {cached} from the cache): {found.dead} dead, "
        f"{found.doubtful} in doubt{known}"
    )
    return 1 if found.dead or found.unreadable else 0
