"""`diff` and `shots`: an issue at two git revisions as its readers get it, and one version's
screenshots (review/ compares, shoots and writes; this prints)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from newsletter.cli.terminal import issue_option, printable, sample_list_option
from newsletter.config.configfile import CONFIG_NAME
from newsletter.errors import NewsletterError
from newsletter.review import SENT, compare, sent_version, version_at
from newsletter.review.shots import SHOTS_HINT, ShotsError, shots_missing
from newsletter.review.summary import diff_lines

chromium_option = click.option(
    "--chromium",
    metavar="PATH",
    default=None,
    help="The Chromium to take screenshots with (default: NEWSLETTER_CHROMIUM, else chromium "
    "on PATH).",
)


@click.command()
@issue_option
@click.argument("revisions", nargs=-1, metavar="[REV] [REV]")
@sample_list_option
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write one self-contained page: screenshots of both versions at 375 and 680 px, "
    "light and dark, the changes marked, the text diff beside them.",
)
@chromium_option
@click.pass_context
def diff(
    ctx: click.Context,
    number: int,
    revisions: tuple[str, ...],
    list_name: str,
    html_file: Path | None,
    chromium: str | None,
) -> None:
    """What changes for readers of an issue between two git revisions: the text part as a
    unified diff, the links added, removed and changed (by item), the subject, the preheader,
    the HTML part's size against Gmail's clip, and the check findings, before and after.

    \b
    newsletter diff --issue 14                 what readers have against the working tree
                                               (before the first send: the last commit)
    newsletter diff --issue 14 sent            what the send to the list recorded (--list)
    newsletter diff --issue 14 main            main against the working tree
    newsletter diff --issue 14 main HEAD       any two revisions
    newsletter diff --issue 14 main --html diff.html   and the screenshots, in one page

    Once an issue went to a real list, that send's record (in the delivery log, no git
    needed) is what its readers have: `diff` with no revision compares the file with it.

    Both versions are read from git (nothing is checked out), each with the templates,
    newsletter.toml and images it had. Colour on a terminal; NO_COLOR turns it off. The
    screenshots need the shots extra and a Chromium (without them, the last line names the
    command that adds them to this install: pip, pipx inject or uv tool); they
    are taken with the network shut: a remote image shows as blocked.
    """
    if len(revisions) > 2:
        raise click.UsageError("at most two revisions: diff --issue N [REV] [REV]")
    missing = shots_missing(chromium)
    if html_file is not None and missing is not None:
        raise ShotsError(f"--html needs screenshots: {missing}")
    if html_file is not None:
        _writable_folder(html_file)
    config = _config(ctx)
    rev_a = revisions[0] if revisions else "HEAD"
    rev_b = revisions[1] if len(revisions) == 2 else None
    sent = sent_version(config, number, list_name) if rev_a == SENT or not revisions else None
    if rev_a == SENT and sent is None:
        raise NewsletterError(
            f"issue {number} has not gone to a real list: there is no sent version to compare",
            hint=f"Compare git revisions instead: newsletter diff --issue {number} HEAD",
        )
    if sent is not None and not revisions:
        click.echo(
            f"comparing with what readers have: {sent.label}"
            f" (`diff --issue {number} HEAD`: against the last commit)"
        )
    found = compare(
        config.resolve().parent,
        number,
        rev_a,
        rev_b,
        config_name=config.name,
        list_name=list_name,
        before=sent if rev_a == SENT or not revisions else None,
    )
    colour = False if os.environ.get("NO_COLOR") else None  # None: click's tty test
    for line, style in diff_lines(found):
        click.echo(
            click.style(printable(line), fg=style) if style else printable(line), color=colour
        )
    if html_file is None:
        click.echo(
            f"pictures: {missing}: {SHOTS_HINT}"
            if missing
            else "pictures: add --html FILE for screenshots of both versions"
        )
        return
    from newsletter.review.pictures import diff_page

    html_file.write_text(diff_page(found, chromium), encoding="utf-8")
    click.echo(f"wrote {printable(str(html_file))}")


def _writable_folder(page: Path) -> None:
    """Refuse a page whose folder is missing or not ours to write in before the screenshots
    are taken: they take a minute on a loaded machine, and were then thrown away."""
    folder = page.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise NewsletterError(
            f"--html {printable(str(page))}: the folder {printable(str(folder))} does not exist"
            " or cannot be written in",
            hint="Make the folder first, or name a file in a folder you can write in.",
        )


@click.command()
@issue_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("shots"),
    show_default=True,
    help="The folder the PNG files are written to (made if missing).",
)
@click.option(
    "--rev",
    default=None,
    metavar="REV",
    help="A git revision to shoot (default: the files as they are, no git needed).",
)
@sample_list_option
@chromium_option
@click.pass_context
def shots(
    ctx: click.Context,
    number: int,
    out: Path,
    rev: str | None,
    list_name: str,
    chromium: str | None,
) -> None:
    """Screenshots of an issue as readers see it: PNG files at 375 and 680 px wide, light and
    dark, taken in headless Chromium with the network shut (a remote image shows as blocked).
    One line per file written. Needs the shots extra and a Chromium: without them, the error
    names the command that adds them to this install (pip, pipx inject or uv tool)."""
    missing = shots_missing(chromium)
    if missing is not None:
        raise ShotsError(f"no screenshots: {missing}")
    config = _config(ctx)
    version = version_at(
        config.resolve().parent, number, rev, config_name=config.name, list_name=list_name
    )
    from newsletter.review.pictures import write_shots

    for path in write_shots(version, out, f"issue-{number}-", chromium):
        click.echo(printable(str(path)))


def _config(ctx: click.Context) -> Path:
    found: Path = ctx.find_root().ensure_object(dict).get("config") or Path(CONFIG_NAME)
    return found
