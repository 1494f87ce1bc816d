"""An issue at two revisions -> what changes for its readers: an IssueDiff value.

Each side is rendered the way `build` and `check` render it (draft.review: the sample
recipient's message, its findings), from the files git holds at that revision (snapshot.py).
What is compared is what readers get, not the source: the text part line by line, the links
by the item they stand in (places.py), the subject, the preheader, the HTML part's size against
Gmail's clip, and the findings. Nothing here prints: the CLI turns the value into lines.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from newsletter.checks.lint import Finding
from newsletter.config.configfile import CONFIG_NAME
from newsletter.config.settings import DEFAULT_LIST, Settings, load_settings
from newsletter.draft import review
from newsletter.errors import NewsletterError
from newsletter.issues import issue_path
from newsletter.models import Issue
from newsletter.rendering.places import IssueLink, Region, issue_links, item_label
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
) -> IssueDiff:
    """Issue `issue` at `rev_a` against `rev_b` (None: the working tree) of the git repository
    holding `project_root`. RevisionError: no repository, an unknown revision, no such issue."""
    with tempfile.TemporaryDirectory(prefix="newsletter-diff-") as folder:
        sides = []
        for name, rev in (("a", rev_a), ("b", rev_b)):
            into = Path(folder) / name
            into.mkdir()
            snapshot = take_snapshot(project_root, rev, issue, config_name, into)
            sides.append(_render(snapshot, issue, list_name))
    before, after = sides
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


def _render(snapshot: Snapshot, number: int, list_name: str) -> Version:
    """One side through draft.review, its faults named by the revision, not the temporary
    folder it was written to."""
    try:
        settings = load_settings(snapshot.config, environ=os.environ)
        draft = review(settings, issue_path(settings.issues_dir, number), list_name)
    except NewsletterError as exc:
        raise RevisionError(
            f"{snapshot.label}: {_unplaced(exc.message, snapshot.root)}",
            hint=_unplaced(exc.hint, snapshot.root) if exc.hint else None,
        ) from None
    return Version(
        label=snapshot.label,
        subject=draft.subject,
        preheader=draft.preheader,
        html=draft.html,
        html_size=draft.html_size,
        text=draft.text,
        findings=tuple(_unplaced(str(f), snapshot.root) for f in draft.findings),
        finding_keys=tuple(_unlocated(f) for f in draft.findings),
        links=tuple(_by_item(draft.issue, link) for link in issue_links(draft.issue)),
        images=_image_files(draft.issue, settings),
    )


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
