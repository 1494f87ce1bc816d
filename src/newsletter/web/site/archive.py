"""The web archive: issue files in, public HTML pages and their images out (for `serve` and
`build --site`).

The index lists each issue's number, title and date (the file's `date`, else the day it was
first sent to a subscriber list). An issue page is the email itself from the same rendering
(render_issue), with the per-recipient placeholders filled by neutral values: the greeting's
fallback name, the page's own URL, and the public "how to unsubscribe" page instead of anyone's
token. Nothing personal ever reaches a page that anyone can open.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.draft import published_issues, sent_dates
from newsletter.errors import IssueError, NewsletterError
from newsletter.fields import IMAGE_TYPES
from newsletter.i18n import PAGES, strings_for
from newsletter.issues import issue_path, list_issue_numbers, load_issue_file
from newsletter.links import how_to_unsubscribe_url, issue_url
from newsletter.models import Issue, Placeholder
from newsletter.rendering.render import dated, render_issue
from newsletter.web.site.deadlinks import mark_dead_links
from newsletter.web.site.feed import FEED_ENTRIES, FeedEntry, add_link_tag, atom_feed
from newsletter.web.site.guard import error_log
from newsletter.web.site.pages import add_signup_link, render_page


@dataclass(frozen=True)
class Entry:
    """One line of the archive index."""

    number: int
    title: str
    date: dt.date | None
    href: str


# include_staging -> the day each issue was first sent (draft.sent_dates, by default).
SentDates = Callable[[bool], dict[int, dt.date]]


class Archive:
    """The issues folder as pages; parsed issues are kept until their file changes. `dates`
    reads when issues were sent (serve passes one that uses its kept connection)."""

    def __init__(self, settings: Settings, dates: SentDates | None = None) -> None:
        self.settings = settings
        self._dates = dates or (lambda staging: sent_dates(settings, include_staging=staging))
        self._issues: dict[Path, tuple[tuple[int, int], Issue]] = {}
        self._pages: dict[Path, tuple[tuple[int, ...], str]] = {}
        self._reported: set[str] = set()

    def numbers(self, sent: dict[int, dt.date] | None = None) -> list[int]:
        """The issues the index lists: every file, or with `[serve] publish = "sent"` only those
        sent to a subscriber list (`sent`: sent_dates, if the caller has them already)."""
        if self.settings.serve.publish == "sent" and sent is None:
            sent = self._dates(False)  # serve's own reader of the log, on its kept connection
        return published_issues(self.settings, sent)

    def is_published(self, number: int) -> bool:
        """Whether anyone may open issue `number`'s page: always with publish = "all"; once it
        was sent to any list, a staging test send included, with publish = "sent"."""
        if self.settings.serve.publish == "all":
            return True
        return number in self._dates(True)

    def issue(self, number: int) -> Issue:
        """Issue `number`; IssueNotFoundError if there is no file, IssueError if it is broken."""
        path = issue_path(self.settings.issues_dir, number)
        stamp = _stamp(path)
        cached = self._issues.get(path)
        if cached is None or cached[0] != stamp:
            cached = self._issues[path] = (stamp, load_issue_file(path))
        return cached[1]

    def entries(self, href: str = "issues/{number}") -> tuple[list[Entry], list[NewsletterError]]:
        """Every readable issue, newest first, and the errors of the files that are not."""
        entries, errors = [], []
        sent = self._dates(False)
        for number in self.numbers(sent):
            try:
                issue = self.issue(number)
            except NewsletterError as exc:
                errors.append(exc)
                continue
            date = issue.date or sent.get(number)
            entries.append(Entry(number, issue.title, date, href.format(number=number)))
        entries.sort(key=lambda e: e.number, reverse=True)
        return entries, errors

    def index_page(self, href: str = "issues/{number}", *, log: bool = True) -> str:
        """The index; each broken file it skips is logged once (`log`: write_site names them
        itself)."""
        entries, errors = self.entries(href)
        for exc in errors if log else []:
            # The editor's mistake goes to the server log, once per fault rather than per visit.
            if exc.message not in self._reported:
                self._reported.add(exc.message)
                error_log.warning("the archive index skips a broken issue: %s", exc.message)
        return render_page("archive.html", self.settings, entries=entries, noindex=False)

    def issue_page(self, number: int) -> str:
        """The email of issue `number` as a public web page (see the module docstring)."""
        path = issue_path(self.settings.issues_dir, number)
        # A template edit changes every page, not only the issue's own file.
        # So does a first send: it dates an issue file that has no `date:`.
        sent = self._dates(False).get(number)
        day = sent.toordinal() if sent else 0
        stamp = (*_stamp(path), *_folder_stamp(self.settings.templates_dir), day)
        cached = self._pages.get(path)
        if cached is None or cached[0] != stamp:
            # The web version is the whole issue, also when the email is cut at Gmail's clip.
            issue = self.issue(number)
            rendered = render_issue(dated(issue, sent), self.settings, whole=True)
            page = add_link_tag(fill_public(rendered.html, self.settings, number), self.settings)
            # The links the editor marked dead, on the page only: the email is as it was sent.
            words = strings_for(PAGES, issue.language or self.settings.newsletter.language)
            page = mark_dead_links(page, issue.dead_links(), words)
            page = add_signup_link(page, self.settings)
            cached = self._pages[path] = (stamp, page)
        return cached[1]

    def feed(self) -> str:
        """The Atom feed of the newest issues the index lists (see feed.py)."""
        entries, _ = self.entries()  # a broken file is left out, as on the index
        items = []
        for entry in entries[:FEED_ENTRIES]:
            try:
                modified = _stamp(issue_path(self.settings.issues_dir, entry.number))[0]
            except OSError:
                continue  # removed since the index was read
            day = dt.datetime.fromtimestamp(modified / 1e9, dt.UTC)
            items.append(FeedEntry(self.issue(entry.number), entry.date, day))
        return atom_feed(self.settings, items)

    def how_to_unsubscribe_page(self, archive_href: str = "./") -> str:
        return render_page("how_to_unsubscribe.html", self.settings, archive_href=archive_href)

    def image_file(self, src: str) -> Path | None:
        """The file of image `src` (`images/cover.png`) under issues/, if an issue anyone may
        open shows it; else None. Nothing else in the folder is served: not the issue files,
        not an unpublished draft's images."""
        if not src.lower().endswith(IMAGE_TYPES) or src not in self.published_images():
            return None
        path = (self.settings.issues_dir / src).resolve()
        if not path.is_relative_to(self.settings.issues_dir.resolve()) or not path.is_file():
            return None
        return path

    def published_images(self) -> set[str]:
        """The images under issues/ of every issue whose page anyone may open."""
        found: set[str] = set()
        numbers = list_issue_numbers(self.settings.issues_dir)
        if self.settings.serve.publish == "sent":
            sent = self._dates(True)  # read once, not per issue
            numbers = [n for n in numbers if n in sent]
        for number in numbers:
            try:
                issue = self.issue(number)
            except NewsletterError:
                continue
            found |= {image.src for image in issue.images if image.local}
        return found


_PLACEHOLDER = re.compile("|".join(re.escape(p.value) for p in Placeholder))


def fill_public(rendered_html: str, settings: Settings, number: int) -> str:
    """Fill an issue's placeholders with values that belong to no one."""
    base_url = settings.newsletter.base_url
    values = Placeholder.values(
        name=settings.newsletter.greeting_fallback,
        unsubscribe_url=how_to_unsubscribe_url(base_url),
        web_url=issue_url(base_url, number),
    )
    return _PLACEHOLDER.sub(lambda m: html.escape(values[Placeholder(m.group())]), rendered_html)


@dataclass(frozen=True)
class SiteBuild:
    """What write_site wrote, and each issue it left out: its number and why its file does
    not load (the IssueError names file, line and field)."""

    written: list[Path]
    left_out: list[tuple[int, IssueError]]


def write_site(settings: Settings, folder: Path, database: Database | None) -> SiteBuild:
    """The archive as static files for any static host: index.html, issues/N/index.html,
    unsubscribe/index.html and feed.xml. An issue file that does not load is left out (no page,
    no index line, no feed entry; a page an earlier build wrote stays as it was) and named in
    the result; every other page is written. `database`: the command's log, where the issues'
    dates are read (None: nothing was sent); each page reads them, so on their own each would
    open it again."""

    def dates(staging: bool) -> dict[int, dt.date]:
        if database is None:
            return {}
        return sent_dates(settings, include_staging=staging, database=database)

    archive = Archive(settings, dates)
    pages: dict[str, str] = {}
    left_out: list[tuple[int, IssueError]] = []
    for number in archive.numbers():
        try:
            pages[f"issues/{number}/index.html"] = archive.issue_page(number)
        except IssueError as exc:
            # One file being written or broken costs its own page, not the archive (the index
            # and the feed skip it too); a template's error is every page's, and still stops.
            left_out.append((number, exc))
    # Relative links, so the site works from any folder of any host (and from file://).
    pages["index.html"] = archive.index_page("issues/{number}/index.html", log=False)
    pages["unsubscribe/index.html"] = archive.how_to_unsubscribe_page("../index.html")
    pages["feed.xml"] = archive.feed()
    written = []
    for name, content in pages.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, content)
        written.append(path)
    # The emails' images under issues/ go where the emails link them: base_url/issues/SRC.
    for src in sorted(archive.published_images()):
        source = archive.image_file(src)
        if source is not None:
            path = folder / "issues" / src
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic_bytes(path, source.read_bytes())
            written.append(path)
    return SiteBuild(written, left_out)


def _write_atomic(path: Path, content: str) -> None:
    # A host serving the folder while it is rebuilt never sees half a page.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)


def _write_atomic_bytes(path: Path, content: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _folder_stamp(folder: Path) -> tuple[int, int]:
    if not folder.is_dir():
        return 0, 0
    stamps = [_stamp(p) for p in folder.iterdir() if p.is_file()]
    return max((s[0] for s in stamps), default=0), sum(s[1] for s in stamps)
