"""An issue at two revisions -> what changes for its readers: an IssueDiff value.

Each side is rendered the way `build` and `check` render it (draft.review: the sample
recipient's message, its findings), from the files git holds at that revision (snapshot.py).
What is compared is what readers get, not the source: the text part line by line, the links
by the item they stand in (places.py), the subject, the preheader, the HTML part's size against
Gmail's clip, and the findings. Nothing here prints: the CLI turns the value into lines.

A side can also be what a real list's send recorded it went out as (`sent_version`: the
delivery log's sent_issues, no git needed): after the first send, that is what readers have.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from newsletter.checks.lint import Finding
from newsletter.config.configfile import CONFIG_NAME
from newsletter.config.settings import DEFAULT_LIST, Settings, load_settings
from newsletter.context import CommandContext
from newsletter.database import SentIssue
from newsletter.draft import Draft, review
from newsletter.errors import NewsletterError
from newsletter.issues import issue_path
from newsletter.models import Issue
from newsletter.rendering.places import IssueLink, Place, Region, issue_links, item_label
from newsletter.rendering.render import image_url
from newsletter.review.snapshot import WORKING_TREE, RevisionError, Snapshot, take_snapshot


@dataclass(frozen=True)
class Version:
    """The issue at one revision, as its readers get it."""

    label: str
    subject: str
    preheader: str
    html: str
    html_size: int  # the HTML part on the wire, after its transfer encoding
    text: str
    findings: tuple[str, ...]  # "error: … [code]", as `check` prints them
    # Each finding without its file:line: a line added above it moves it, and changes nothing.
    finding_keys: tuple[str, ...]
    links: tuple[IssueLink, ...]
    # The issue's own image files by the URL the HTML part names them with: a screenshot
    # shows them from the revision, not from the site (review/shots.py).
    images: Mapping[str, bytes] = field(default_factory=dict)
    # What a send recorded: the day it went (the other side is rendered as of that day too,
    # so the date it shows is no change); None for a revision.
    sent_on: dt.date | None = None


@dataclass(frozen=True)
class LinkChange:
    """A link readers get that was added, removed or pointed elsewhere, by the item it is in."""

    kind: Literal["added", "removed", "changed"]
    label: str  # the item's title (or the section's, "intro", "outro")
    before: str | None
    after: str | None


@dataclass(frozen=True)
class IssueDiff:
    number: int
    before: Version
    after: Version
    text_diff: tuple[str, ...]  # the text part as a unified diff, without line ends
    links: tuple[LinkChange, ...]

    @property
    def findings_gone(self) -> tuple[str, ...]:
        kept = set(self.after.finding_keys)
        pairs = zip(self.before.findings, self.before.finding_keys, strict=True)
        return tuple(shown for shown, key in pairs if key not in kept)

    @property
    def findings_new(self) -> tuple[str, ...]:
        known = set(self.before.finding_keys)
        pairs = zip(self.after.findings, self.after.finding_keys, strict=True)
        return tuple(shown for shown, key in pairs if key not in known)


def compare(
    project_root: Path,
    issue: int,
    rev_a: str = "HEAD",
    rev_b: str | None = None,
    *,
    config_name: str = CONFIG_NAME,
    list_name: str = DEFAULT_LIST,
    before: Version | None = None,
) -> IssueDiff:
    """Issue `issue` at `rev_a` against `rev_b` (None: the working tree) of the git repository
    holding `project_root`; `before`, when given, stands in for `rev_a` (what a send recorded:
    `sent_version`). RevisionError: no repository, an unknown revision, no such issue."""
    dates = None if before is None or before.sent_on is None else {issue: before.sent_on}
    if before is not None and rev_b is None:
        here = Snapshot(WORKING_TREE, project_root, project_root / config_name)
        return _diff(issue, before, _render(here, issue, list_name, dates))
    with tempfile.TemporaryDirectory(prefix="newsletter-diff-") as folder:
        sides = [] if before is None else [before]
        revisions = (("a", rev_a), ("b", rev_b)) if before is None else (("b", rev_b),)
        for name, rev in revisions:
            into = Path(folder) / name
            into.mkdir()
            snapshot = take_snapshot(project_root, rev, issue, config_name, into)
            sides.append(_render(snapshot, issue, list_name, dates))
    return _diff(issue, *sides)


def _diff(issue: int, before: Version, after: Version) -> IssueDiff:
    text_diff = difflib.unified_diff(
        _lines(before.text),
        _lines(after.text),
        fromfile=f"{before.label}: issue {issue}, text part",
        tofile=f"{after.label}: issue {issue}, text part",
        lineterm="",
    )
    return IssueDiff(
        issue, before, after, tuple(text_diff), link_changes(before.links, after.links)
    )


def version_at(
    project_root: Path,
    issue: int,
    rev: str | None = None,
    *,
    config_name: str = CONFIG_NAME,
    list_name: str = DEFAULT_LIST,
) -> Version:
    """Issue `issue` at `rev` of the repository holding `project_root`; None: the project's
    files as they are (no git needed)."""
    if rev is None:
        here = Snapshot(WORKING_TREE, project_root, project_root / config_name)
        return _render(here, issue, list_name)
    with tempfile.TemporaryDirectory(prefix="newsletter-shots-") as folder:
        snapshot = take_snapshot(project_root, rev, issue, config_name, Path(folder))
        return _render(snapshot, issue, list_name)


def link_changes(
    before: tuple[IssueLink, ...], after: tuple[IssueLink, ...]
) -> tuple[LinkChange, ...]:
    """The links as a sequence matched by URL: a run replaced by one as long is links changed
    one for one (a link edited where it stands); the rest are added or removed. Matching by
    place alone would call every link after an inserted one changed."""
    a = [link.url for link in before]
    b = [link.url for link in after]
    changes: list[LinkChange] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            changes += [
                LinkChange("changed", new.label, old.url, new.url)
                for old, new in zip(before[i1:i2], after[j1:j2], strict=True)
            ]
            continue
        changes += [LinkChange("removed", old.label, old.url, None) for old in before[i1:i2]]
        changes += [LinkChange("added", new.label, None, new.url) for new in after[j1:j2]]
    return tuple(changes)


def _render(
    snapshot: Snapshot, number: int, list_name: str, dates: Mapping[int, dt.date] | None = None
) -> Version:
    """One side through draft.review, its faults named by the revision, not the temporary
    folder it was written to. `dates`: the day each issue went out (draft.sent_dates)."""
    try:
        settings = load_settings(snapshot.config, environ=os.environ)
        path = issue_path(settings.issues_dir, number)
        draft = review(settings, path, list_name, dates=dates)
    except NewsletterError as exc:
        raise RevisionError(
            f"{snapshot.label}: {_unplaced(exc.message, snapshot.root)}",
            hint=_unplaced(exc.hint, snapshot.root) if exc.hint else None,
        ) from None
    return version_of(draft, settings, snapshot.label, snapshot.root)


def version_of(draft: Draft, settings: Settings, label: str, root: Path) -> Version:
    """A rendered draft as one side of a diff; its findings' paths as the project at `root`
    names them."""
    return Version(
        label=label,
        subject=draft.subject,
        preheader=draft.preheader,
        html=draft.html,
        html_size=draft.html_size,
        text=draft.text,
        findings=tuple(_unplaced(str(f), root) for f in draft.findings),
        finding_keys=tuple(_unlocated(f) for f in draft.findings),
        links=tuple(_by_item(draft.issue, link) for link in issue_links(draft.issue)),
        images=_image_files(draft.issue, settings),
    )


def recorded(version: Version) -> dict[str, Any]:
    """What a send keeps of a version (sentissues.py): all a diff compares but the image files,
    which stay in the project (a screenshot of the sent side shows them from there, or blocked)."""
    return {
        "subject": version.subject,
        "preheader": version.preheader,
        "html": version.html,
        "html_size": version.html_size,
        "text": version.text,
        "findings": list(version.findings),
        "finding_keys": list(version.finding_keys),
        "links": [[*link.place, link.url, link.label] for link in version.links],
    }


SENT = "sent"  # diff's name for what a real list's send recorded, beside git's revisions


def sent_label(sent: SentIssue) -> str:
    """How a diff and a check name what a send recorded: `sent to main on 2026-12-01`."""
    return f"sent to {sent.list_name} on {sent.sent_at.date().isoformat()}"


def from_record(sent: SentIssue) -> Version:
    """What `recorded` kept, as a diff's side."""
    kept = sent.version
    links = tuple(
        IssueLink(Place(Region(region), section, item, link), url, label)
        for region, section, item, link, url, label in kept.get("links", [])
    )
    return Version(
        label=sent_label(sent),
        subject=str(kept.get("subject", "")),
        preheader=str(kept.get("preheader", "")),
        html=str(kept.get("html", "")),
        html_size=int(kept.get("html_size", 0)),
        text=str(kept.get("text", "")),
        findings=tuple(kept.get("findings", [])),
        finding_keys=tuple(kept.get("finding_keys", [])),
        links=links,
        sent_on=sent.sent_at.date(),
    )


def sent_version(config: Path, issue: int, list_name: str) -> Version | None:
    """What issue `issue` went to the real list `list_name` as (or, when it never went there,
    to the first real list it did); None when it went to none, or there is no delivery log."""
    settings = load_settings(config, environ=os.environ)
    with CommandContext(settings) as context:
        database = context.existing_database()
        sent = database.sent_issues.of(issue) if database is not None else []
        shown = context.first_sent().get(issue) if sent else None
    chosen = [s for s in sent if s.list_name == list_name] or sent
    if not chosen:
        return None
    version = from_record(chosen[0])
    # The day the email shows, as the send's own render had it (the newsletter's zone).
    return dataclasses.replace(version, sent_on=shown) if shown else version


def _image_files(issue: Issue, settings: Settings) -> dict[str, bytes]:
    """The issue's images under issues/ (the loader has checked each is there), by URL."""
    base = settings.newsletter.base_url
    found = {}
    for image in issue.images:
        if image.local and (settings.issues_dir / image.src).is_file():
            found[image_url(image, base)] = (settings.issues_dir / image.src).read_bytes()
    return found


def _by_item(issue: Issue, link: IssueLink) -> IssueLink:
    """A link of an item's links row named by its item too: its own label ("paper") alone
    would not say which item's paper changed."""
    place = link.place
    if place.region is not Region.LINKS:
        return link  # the item's title, its section's heading, intro or outro already
    item = issue.sections[place.section].items[place.item]
    return link._replace(label=f"{item_label(item)}: {link.label}")


def _unlocated(finding: Finding) -> str:
    """What a finding says, without the `file:line: ` its message starts with when it has one."""
    message = finding.message
    if finding.line is not None:
        message = message.split(f":{finding.line}: ", 1)[-1]
    return f"{finding.level} {finding.code} {message}"


def _unplaced(text: str, root: Path) -> str:
    """`text` with the temporary folder's path taken out: paths as the project names them."""
    for form in (str(root.resolve()), str(root)):
        text = text.replace(form + os.sep, "").replace(form, ".")
    return text


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").split("\n")
