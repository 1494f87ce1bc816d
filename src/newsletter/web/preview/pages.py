"""What the preview shows: IssueViews and captured messages in, escaped HTML pages out.

The UI pages are Jinja templates in templates/ with autoescape on, so every value taken from an
issue, a template error or a captured message is escaped. The email itself is never pasted into
a UI page: it is served on its own URL (see `email_document`) and shown in a sandboxed iframe.
A captured message's HTML is served the same way under CAPTURED_POLICY, which loads nothing from
anywhere: whoever sent it may be a stranger.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)

from newsletter.checks.spamscore import SpamResult, score_message_async, spam_findings
from newsletter.clicks.gather import gather_report, unsent_report
from newsletter.clicks.page import render_html
from newsletter.context import CommandContext
from newsletter.errors import IssueNotFoundError, NewsletterError, display_path
from newsletter.fields import IMAGE_TYPES
from newsletter.preflight.background import BackgroundChecks, BackgroundRuns
from newsletter.rendering.clip import GMAIL_CLIP, KB
from newsletter.rendering.templatecache import page_environment
from newsletter.send.mailbox import (
    LISTED_LIMIT,
    captured_messages,
    captured_path,
    count_captured,
    read_captured,
)
from newsletter.web.listen import NO_STORE
from newsletter.web.preview.received import (
    READ_LIMIT,
    ReceivedMessage,
    disarm_frames,
    open_received,
    visible,
)

if TYPE_CHECKING:
    from newsletter.web.preview.workspace import Hub, IssueView, Workspace

UI_DIR = Path(__file__).resolve().parent / "templates"
FILES_PATH = "/files/"  # the issues folder's images, for the email frame
Scheme = Literal["light", "dark"]

# Always-true and always-false stand-ins for the email's prefers-color-scheme queries.
_MATCH, _NO_MATCH = "(min-width: 0px)", "(max-width: -1px)"
_SCHEME_QUERY = re.compile(r"\(\s*prefers-color-scheme\s*:\s*(dark|light)\s*\)", re.IGNORECASE)
# Each pattern gives up at the next tag, so a hostile message's HTML costs linear time.
_HEAD = re.compile(r"<head\b[^<>]*>", re.IGNORECASE)
_DOCTYPE = re.compile(r"\A\s*<!doctype\b[^<>]*>", re.IGNORECASE)
_STYLE_OPEN = re.compile(r"<style\b", re.IGNORECASE)
_STYLE_CLOSE = re.compile(r"</style\s*>", re.IGNORECASE)

_env = page_environment(UI_DIR)
_env.globals.update(gmail_clip=GMAIL_CLIP, kb=KB)
_env.filters["kb"] = lambda size: f"{size / KB:.1f} KB"
_env.filters["local_time"] = lambda epoch: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
_env.filters["visible"] = visible


def render_page(template: str, **context: Any) -> str:
    return _env.get_template(template).render(**context)


def email_document(html: str, scheme: Scheme, image_base: str = "") -> str:
    """The email for the preview frame, its dark-mode rules forced on or off.

    Browsers apply `@media (prefers-color-scheme: dark)` from the viewer's OS setting; rewriting
    the queries makes the toggle decide instead, using the email's own rules. Links open in a new
    tab: most sites refuse to be framed. Images under issues/ are linked where `serve` publishes
    them (`image_base`, base_url/issues/): the preview shows them from the folder itself.
    """

    def decide(match: re.Match[str]) -> str:
        return _MATCH if match.group(1).lower() == scheme else _NO_MATCH

    # Only inside <style>: an issue may well *write about* prefers-color-scheme in its text.
    pieces, end = [], 0
    while (opened := _STYLE_OPEN.search(html, end)) and (
        closed := _STYLE_CLOSE.search(html, opened.end())
    ):
        pieces += [
            html[end : opened.start()],
            _SCHEME_QUERY.sub(decide, html[opened.start() : closed.end()]),
        ]
        end = closed.end()
    html = "".join([*pieces, html[end:]])
    if image_base:
        html = html.replace(f'src="{image_base}', f'src="{FILES_PATH}')
    base = '<base target="_blank">'
    if head := _HEAD.search(html):
        return f"{html[: head.end()]}{base}{html[head.end() :]}"
    # No <head> (a hand-written message): after the doctype, where a parser opens the head.
    at = doctype.end() if (doctype := _DOCTYPE.search(html)) else 0
    return f"{html[:at]}{base}{html[at:]}"


UI_POLICY = (
    "default-src 'self'; img-src 'self' data:; frame-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# The email may load remote images (as a mail client would) but never run a script.
EMAIL_POLICY = (
    "default-src 'none'; img-src http: https: data:; style-src 'unsafe-inline'; "
    "font-src http: https: data:; frame-ancestors 'self'"
)
# A captured message came from whoever reached the capture server: it runs nothing and loads
# nothing. A remote image or font would tell its sender when and from where the mailbox was read
# (or make this browser call another service on loopback); only what the message carries inline
# (data: URLs, its own <style>) shows. Links still open, in a new tab, when clicked.
CAPTURED_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)
CAPTURED_HEADERS = {
    **NO_STORE,
    "Content-Security-Policy": CAPTURED_POLICY,
    "Referrer-Policy": "no-referrer",  # a clicked link does not learn the preview's URL
    "X-DNS-Prefetch-Control": "off",
    "X-Content-Type-Options": "nosniff",
}
# The click report runs nothing and loads nothing: its charts are inline SVG.
REPORT_HEADERS = {
    **NO_STORE,
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "frame-ancestors 'self'",
}
# The raw message, as text: nothing in it is ever run or rendered as a page.
RAW_HEADERS = {
    **NO_STORE,
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "X-Content-Type-Options": "nosniff",
}


class Pages:
    """The preview's request handlers; every page carries the version it was rendered at."""

    def __init__(self, workspace: Workspace, hub: Hub) -> None:
        self.workspace = workspace
        self.hub = hub
        # [check] online: a run per render; one that finishes late reloads the open pages.
        self.online = BackgroundChecks(hub.publish)
        # SpamAssassin (~1.5 s) is never waited for: its result updates the Checks tab alone,
        # through a "checks" event that leaves the email frame as it is.
        self.spam: BackgroundRuns[SpamResult] = BackgroundRuns(
            lambda: hub.publish(checks=True), wait=0
        )

    def _page(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        settings = self.workspace.settings
        context.setdefault("state", "ok")
        context.setdefault("email_src", "")
        html = render_page(
            template,
            version=self.hub.version,
            newsletter_name=settings.newsletter.name if settings else "newsletter",
            **context,
        )
        headers = {**NO_STORE, "Content-Security-Policy": UI_POLICY}
        return HTMLResponse(html, status_code=status, headers=headers)

    def _error_page(self, heading: str, error: NewsletterError, status: int) -> HTMLResponse:
        return self._page("page_error.html", status, heading=heading, error=error, state="error")

    def _view(self, request: Request) -> IssueView | HTMLResponse:
        number = int(request.path_params["number"])
        try:
            return self.workspace.view(number)
        except IssueNotFoundError as exc:
            return self._error_page(f"No issue {number}", exc, 404)
        except NewsletterError as exc:
            return self._error_page("Cannot read the config", exc, 500)

    async def index(self, request: Request) -> Response:
        try:
            rows = [self.workspace.view(n) for n in self.workspace.numbers()]
        except NewsletterError as exc:
            return self._error_page("Cannot read the config", exc, 500)
        assert self.workspace.settings is not None
        return self._page("index.html", rows=rows, issues_dir=self.workspace.settings.issues_dir)

    async def issue(self, request: Request) -> Response:
        view = self._view(request)
        if isinstance(view, Response):
            return view
        settings = self.workspace.settings
        assert settings is not None
        online = None
        if settings.check.online and view.issue is not None:
            online = await self.online.report(
                view, settings, view.issue, view.message, self.workspace.list_name
            )
        spam = None
        if view.error is None:
            message = view.message
            spam = await self.spam.result(view, view.number, lambda: score_message_async(message))
        checks = view.findings + (spam_findings(spam) if spam is not None else [])
        return self._page(
            "issue.html",
            view=view,
            checks=sorted(checks, key=lambda f: f.level != "error"),
            spam=spam,
            online_on=settings.check.online,
            online=online,
            state="error" if view.error else "ok",
            email_src="" if view.error else f"/issues/{view.number}/email.html",
            sample=f"{settings.newsletter.sample_name} <{settings.newsletter.sample_email}>",
            list_name=self.workspace.list_name,
        )

    def _part(self, request: Request, part: Callable[[IssueView], Response]) -> Response:
        view = self._view(request)
        if isinstance(view, Response):
            return view
        if view.error is not None:
            text = f"{view.error.message}\n{view.error.hint}\n"
            return PlainTextResponse(text, status_code=422, headers=NO_STORE)
        return part(view)

    async def email(self, request: Request) -> Response:
        scheme: Scheme = "dark" if request.query_params.get("scheme") == "dark" else "light"
        headers = {**NO_STORE, "Content-Security-Policy": EMAIL_POLICY}
        settings = self.workspace.settings
        base = f"{settings.newsletter.base_url.rstrip('/')}/issues/" if settings else ""
        return self._part(
            request,
            lambda v: HTMLResponse(email_document(v.html, scheme, base), headers=headers),
        )

    async def image(self, request: Request) -> Response:
        """An image under the issues folder, for the email frame (see email_document)."""
        settings = self.workspace.settings
        src = str(request.path_params["path"])
        if settings is None or not src.lower().endswith(IMAGE_TYPES):
            return PlainTextResponse("no such image\n", status_code=404)
        folder = settings.issues_dir.resolve()
        path = (folder / src).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            return PlainTextResponse("no such image\n", status_code=404)
        return FileResponse(path, headers=NO_STORE)

    async def text(self, request: Request) -> Response:
        return self._part(request, lambda v: PlainTextResponse(v.text, headers=NO_STORE))

    async def source(self, request: Request) -> Response:
        return self._part(request, lambda v: PlainTextResponse(v.html, headers=NO_STORE))

    async def report(self, request: Request) -> Response:
        """The Report tab: `newsletter report` of the issue's send to the preview's list, read
        from the delivery log as it is now (none yet: a report of nothing sent)."""
        view = self._view(request)
        if isinstance(view, Response):
            return view
        settings = self.workspace.settings
        if view.issue is None or settings is None:
            return PlainTextResponse("the issue cannot be read\n", 422, headers=NO_STORE)
        issue, list_name = view.issue, self.workspace.list_name

        def read() -> str:
            # A request is a command of its own (context.py), in the thread that reads: the
            # log read once, and none made when nothing was sent.
            with CommandContext(settings) as context:
                database = context.existing_database()
                made = (
                    unsent_report(settings, issue, list_name)
                    if database is None
                    else gather_report(database, settings, issue, list_name)
                )
            return render_html(made, language=settings.newsletter.language)

        try:
            page = await run_in_threadpool(read)
        except NewsletterError as exc:
            return self._error_page("Cannot read the delivery log", exc, 500)
        return HTMLResponse(page, headers=REPORT_HEADERS)

    async def eml(self, request: Request) -> Response:
        def respond(view: IssueView) -> Response:
            if request.query_params.get("download"):
                name = f"issue-{view.number}-sample.eml"
                headers = {**NO_STORE, "Content-Disposition": f'attachment; filename="{name}"'}
                return Response(view.message, media_type="message/rfc822", headers=headers)
            return Response(view.message, media_type="text/plain; charset=utf-8", headers=NO_STORE)

        return self._part(request, respond)

    def _mailbox_dir(self) -> Path | None:
        settings = self.workspace.settings
        return None if settings is None else settings.state_dir / "mailbox"

    async def mailbox(self, request: Request) -> Response:
        directory = self._mailbox_dir()
        if directory is None:
            return self._page("mailbox.html", messages=[], total=0, directory="")
        messages = await run_in_threadpool(captured_messages, directory, LISTED_LIMIT)
        total = await run_in_threadpool(count_captured, directory)
        return self._page(
            "mailbox.html", messages=messages, total=total, directory=display_path(directory)
        )

    def _received(self, key: str) -> ReceivedMessage | None:
        directory = self._mailbox_dir()
        found = read_captured(directory, key, READ_LIMIT) if directory else None
        return None if found is None else open_received(*found)

    async def message(self, request: Request) -> Response:
        """A captured message, shown the way an issue is: its HTML in the frame, its text,
        headers and raw source in tabs."""
        key = request.path_params["key"]
        message = await run_in_threadpool(self._received, key)
        if message is None:
            error = NewsletterError(
                "no such message in the capture mailbox",
                hint="It may have been deleted; the Mailbox page lists what is there.",
            )
            return self._error_page("No such message", error, 404)
        return self._page(
            "message.html",
            message=message,
            key=key,
            email_src="" if message.html is None else f"/mailbox/{quote(key, safe='')}/email.html",
        )

    async def captured_email(self, request: Request) -> Response:
        scheme: Scheme = "dark" if request.query_params.get("scheme") == "dark" else "light"
        message = await run_in_threadpool(self._received, request.path_params["key"])
        if message is None or message.html is None:
            return PlainTextResponse("no such message, or no HTML part\n", status_code=404)
        html = message.html
        document = await run_in_threadpool(lambda: email_document(disarm_frames(html), scheme))
        return HTMLResponse(document, headers=CAPTURED_HEADERS)

    async def captured(self, request: Request) -> Response:
        directory = self._mailbox_dir()
        key = request.path_params["key"]
        path = await run_in_threadpool(captured_path, directory, key) if directory else None
        if path is None:
            return PlainTextResponse("no such message\n", status_code=404)
        if request.query_params.get("download"):
            name = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:80]
            headers = {**RAW_HEADERS, "Content-Disposition": f'attachment; filename="{name}.eml"'}
            return FileResponse(path, media_type="message/rfc822", headers=headers)
        return FileResponse(path, media_type="text/plain; charset=utf-8", headers=RAW_HEADERS)

    async def events(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            # retry: reconnect quickly after a restart of the preview.
            yield "retry: 500\n\n"
            async for event in self.hub.events():
                if event is None:
                    yield ": keep-alive\n\n"
                else:
                    yield f"event: {event[0]}\ndata: {event[1]}\n\n"

        headers = {**NO_STORE, "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
