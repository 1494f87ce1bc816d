"""The live preview's state: project files in, rendered IssueViews and change events out.

A Workspace renders an issue the way `send` does (issue file -> render -> one sample recipient's
message -> checks) and keeps the result until a watched file changes. The watcher bumps a version
that a Server-Sent Events stream pushes to every open page, which then fetches itself again.
Broken input is a result too: the page shows the error where the email would be.
preview_pages.py turns views into pages; preview_server.py serves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import watchfiles

from newsletter.checks.lint import Finding, Silenced
from newsletter.config.settings import DEFAULT_LIST, Settings, load_settings
from newsletter.draft import review
from newsletter.errors import NewsletterError
from newsletter.issues import issue_number_of, issue_path, list_issue_numbers
from newsletter.issues.sequencefiles import FOLDER
from newsletter.models import Issue, RenderedEmail

logger = logging.getLogger(__name__)
# Wait this long for a burst of file events to settle: long enough to see an editor's
# write-then-rename as one save, short enough to stay well inside the 300 ms budget.
WATCH_STEP_MS = 30
KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True)
class IssueView:
    """One issue as a subscriber gets it, or the error that stops it from rendering."""

    number: int
    path: Path
    issue: Issue | None = None
    rendered: RenderedEmail | None = None
    message: bytes = b""
    html: str = ""
    text: str = ""
    html_size: int = 0
    # What an inbox list shows before the email is opened.
    sender: str = ""
    subject: str = ""
    preheader: str = ""
    findings: list[Finding] = field(default_factory=list)
    silenced: list[Silenced] = field(default_factory=list)  # what the issue file silenced
    error: NewsletterError | None = None

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.level == "warning")

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.level == "error")


class Workspace:
    """The project as the preview sees it: settings reloaded on change, issues rendered on use."""

    def __init__(
        self,
        config: Path,
        settings: Settings | None = None,
        list_name: str = DEFAULT_LIST,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.list_name = list_name
        self.report = report
        self.settings = settings
        self.config_error: NewsletterError | None = None
        self._views: dict[int, IssueView] = {}
        if settings is None:
            self.reload_settings()

    def reload_settings(self) -> None:
        try:
            self.settings = load_settings(self.config)
            self.config_error = None
        except NewsletterError as exc:
            self.config_error = exc
            self._say(f"{self.config.name}: {exc.message}")

    def _say(self, line: str) -> None:
        if self.report is not None:
            self.report(line)

    def invalidate(self, changed: set[Path]) -> None:
        """Forget what `changed` affects: one issue for its own file, everything otherwise."""
        if any(path.name == self.config.name for path in changed):
            self.reload_settings()
        issues_dir = self.settings.issues_dir if self.settings is not None else None
        found = [issue_number_of(p) if p.parent == issues_dir else None for p in changed]
        if not found or None in found:
            self._views.clear()  # a template, the config, or something we cannot place
            return
        for number in found:
            if number is not None:
                self._views.pop(number, None)

    def watched(self) -> tuple[list[Path], Path]:
        """Folders to watch recursively (existing or not yet), and the config file's folder."""
        folders = []
        if self.settings is not None:
            folders = [self.settings.issues_dir, self.settings.templates_dir]
            folders.append(self.settings.resolve(Path(FOLDER)))  # the Sequences view
        return folders, self.config.parent

    def current(self) -> Settings:
        """The settings in force; the config's error while newsletter.toml is broken."""
        if self.config_error is not None or self.settings is None:
            assert self.config_error is not None
            raise self.config_error
        return self.settings

    def numbers(self) -> list[int]:
        return list_issue_numbers(self.current().issues_dir)

    def view(self, number: int) -> IssueView:
        """The rendered issue; raises IssueNotFoundError when there is no such file."""
        settings = self.current()
        if number not in self._views:
            started = time.perf_counter()
            view = build_view(settings, number, self.list_name)
            elapsed = (time.perf_counter() - started) * 1000
            if view.error is not None:
                problems = view.error.message.replace("\n", "\n    ")
                self._say(f"issue {number}: cannot render:\n    {problems}")
            else:
                size = view.html_size / 1024
                silenced = sum(len(s.findings) for s in view.silenced)
                self._say(
                    f"issue {number}: rendered in {elapsed:.0f} ms, HTML {size:.1f} KB, "
                    f"{view.errors} error(s), {view.warnings} warning(s)"
                    + (f", {silenced} silenced" if silenced else "")
                )
            self._views[number] = view
        return self._views[number]


def build_view(settings: Settings, number: int, list_name: str = DEFAULT_LIST) -> IssueView:
    """The send pipeline for the sample recipient; any failure becomes the view's error.

    Raises IssueNotFoundError only when there is no file for `number` (a 404, not an error).
    """
    path = issue_path(settings.issues_dir, number)
    try:
        return _build_view(settings, number, path, list_name)
    except NewsletterError as exc:
        return IssueView(number, path, error=exc)
    except Exception as exc:
        # The preview must outlive any failure, a bug of ours included: show it, log the trace.
        logger.exception("rendering issue %s failed", number)
        error = NewsletterError(
            f"unexpected {type(exc).__name__} while rendering: {exc}",
            hint="This is a bug in newsletter, not in your files; the terminal has the traceback.",
        )
        return IssueView(number, path, error=error)


def _build_view(settings: Settings, number: int, path: Path, list_name: str) -> IssueView:
    draft = review(settings, path, list_name)
    return IssueView(
        number,
        path,
        issue=draft.issue,
        rendered=draft.rendered,
        message=draft.message,
        html=draft.html,
        text=draft.text,
        html_size=draft.html_size,
        sender=draft.sender,
        subject=draft.subject,
        preheader=draft.preheader,
        findings=draft.findings,
        silenced=draft.silenced,
    )


class Hub:
    """Tells every open page that something changed.

    `version` names the state of the project's files (issues, templates, config); `mail` counts
    changes to the capture mailbox, a separate event so a test send does not reload the email.
    """

    def __init__(self) -> None:
        self.boot = secrets.token_hex(4)
        self.count = 0
        self.mail = 0
        self.checks = 0
        self.closed = False
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def version(self) -> str:
        return f"{self.boot}.{self.count}"

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def publish(self, *, mail: bool = False, checks: bool = False) -> None:
        """A new version of the project's files; or with `mail`, a change to the capture
        mailbox; or with `checks`, a background check (SpamAssassin) that finished."""
        if mail:
            self.mail += 1
        elif checks:
            self.checks += 1
        else:
            self.count += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def close(self) -> None:
        """Safe from any thread or a signal handler: ends every stream so shutdown is quick."""
        if self._loop is None or self._loop.is_closed():
            self.closed = True
            return
        self._loop.call_soon_threadsafe(self._close)

    def _close(self) -> None:
        self.closed = True
        self._changed.set()

    async def events(self) -> AsyncIterator[tuple[str, str] | None]:
        """("version", v), ("mail", n) and ("checks", n) now, then each time one changes; None
        every KEEPALIVE_SECONDS of quiet. A page that reconnects compares them with what it
        shows."""
        count, mail, checks = self.count, self.mail, self.checks
        yield "version", self.version
        yield "mail", str(mail)
        yield "checks", str(checks)
        while not self.closed:
            # No await between this check and the wait: a publish cannot slip in unseen.
            if (self.count, self.mail, self.checks) == (count, mail, checks):
                try:
                    await asyncio.wait_for(self._changed.wait(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield None
                    continue
            if self.closed:
                return
            if self.count != count:
                count = self.count
                yield "version", self.version
            if self.mail != mail:
                mail = self.mail
                yield "mail", str(mail)
            if self.checks != checks:
                checks = self.checks
                yield "checks", str(checks)


async def watch(workspace: Workspace, hub: Hub, stop: asyncio.Event) -> None:
    """Invalidate and publish on every change to issues, templates or the config file, and
    publish each change to the capture mailbox. A folder that does not exist yet (a new
    project's issues/, the Maildir before `newsletter mailbox` first ran) is followed once it
    appears."""
    folders, config_dir = workspace.watched()

    def is_config(_: watchfiles.Change, path: str) -> bool:
        return Path(path).name == workspace.config.name

    async def appeared(folder: Path) -> bool:
        """Wait for `folder` to exist; False if stopped first."""
        while not folder.is_dir():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            if stop.is_set():
                return False
        return True

    async def follow_config() -> None:
        async for changes in watchfiles.awatch(
            config_dir, watch_filter=is_config, step=WATCH_STEP_MS, stop_event=stop, recursive=False
        ):
            workspace.invalidate({Path(path) for _, path in changes})
            hub.publish()

    async def follow(folder: Path) -> None:
        if not folder.is_dir():
            if not await appeared(folder):
                return
            workspace.invalidate({folder})
            hub.publish()
        async for changes in watchfiles.awatch(folder, step=WATCH_STEP_MS, stop_event=stop):
            workspace.invalidate({Path(path) for _, path in changes})
            hub.publish()

    async def follow_mailbox(folder: Path) -> None:
        if await appeared(folder):
            async for _ in watchfiles.awatch(folder, step=WATCH_STEP_MS, stop_event=stop):
                hub.publish(mail=True)

    tasks = [follow_config(), *(follow(folder) for folder in folders)]
    if workspace.settings is not None:
        tasks.append(follow_mailbox(workspace.settings.state_dir / "mailbox"))
    await asyncio.gather(*tasks)
