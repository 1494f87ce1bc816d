"""The preview's Sequences view: the project's sequence files in; escaped HTML pages out, each
step rendered and checked by the same pipeline as an issue (draft.review), its email in a
sandboxed frame on its own URL, as an issue's is.

Read on each request (a sequence is a few short files): an edit shows on the next reload, and
the live-reload watcher follows the sequences folder too (workspace.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from newsletter.draft import Draft, review
from newsletter.errors import NewsletterError
from newsletter.issues.sequencefiles import FOLDER, Sequence, Step, load_sequence, sequence_names
from newsletter.schedule.when import span
from newsletter.web.listen import NO_STORE
from newsletter.web.preview.pages import (
    EMAIL_POLICY,
    UI_POLICY,
    Scheme,
    email_document,
    render_page,
)

if TYPE_CHECKING:
    from newsletter.web.preview.workspace import Hub, Workspace


@dataclass(frozen=True)
class SequenceRow:
    """A sequence as the index lists it: its steps with their drafts, or why it cannot load."""

    name: str
    sequence: Sequence | None
    drafts: tuple[tuple[Step, Draft | None, str], ...] = ()  # each step, its draft or error
    error: NewsletterError | None = None


class SequencePages:
    def __init__(self, workspace: Workspace, hub: Hub) -> None:
        self.workspace = workspace
        self.hub = hub

    def _folder(self) -> Path:
        return self.workspace.current().resolve(Path(FOLDER))

    def _draft(self, step: Step) -> tuple[Draft | None, str]:
        try:
            settings = self.workspace.current()
            return review(settings, step.file.path, self.workspace.list_name, source=step.file), ""
        except NewsletterError as exc:
            return None, str(exc)

    def _page(self, template: str, status: int = 200, **context: object) -> HTMLResponse:
        settings = self.workspace.settings
        html = render_page(
            template,
            version=self.hub.version,
            newsletter_name=settings.newsletter.name if settings else "newsletter",
            state=context.pop("state", "ok"),
            email_src=context.pop("email_src", ""),
            span=span,
            **context,
        )
        headers = {**NO_STORE, "Content-Security-Policy": UI_POLICY}
        return HTMLResponse(html, status_code=status, headers=headers)

    async def index(self, request: Request) -> Response:
        try:
            folder = self._folder()
        except NewsletterError as exc:
            return self._page("page_error.html", 500, heading="Cannot read the config", error=exc)
        rows = []
        for name in sequence_names(folder):
            try:
                sequence = load_sequence(folder, name)
            except NewsletterError as exc:
                rows.append(SequenceRow(name, None, error=exc))
                continue
            drafts = tuple((step, *self._draft(step)) for step in sequence.steps)
            rows.append(SequenceRow(name, sequence, drafts))
        return self._page("sequences.html", rows=rows, folder=FOLDER)

    def _step(self, request: Request) -> tuple[Step, Draft | None, str] | Response:
        name, number = str(request.path_params["name"]), int(request.path_params["number"])
        try:
            step = load_sequence(self._folder(), name).step(number)
        except NewsletterError as exc:
            return self._page("page_error.html", 404, heading=f"No step {name}/{number}", error=exc)
        return (step, *self._draft(step))

    async def step(self, request: Request) -> Response:
        found = self._step(request)
        if isinstance(found, Response):
            return found
        step, draft, error = found
        src = f"/sequences/{step.sequence}/{step.number}/email.html"
        return self._page(
            "step.html",
            step=step,
            draft=draft,
            error=error,
            state="error" if draft is None else "ok",
            email_src="" if draft is None else src,
        )

    async def email(self, request: Request) -> Response:
        found = self._step(request)
        if isinstance(found, Response):
            return found
        _, draft, error = found
        if draft is None:
            return PlainTextResponse(f"{error}\n", status_code=422, headers=NO_STORE)
        scheme: Scheme = "dark" if request.query_params.get("scheme") == "dark" else "light"
        headers = {**NO_STORE, "Content-Security-Policy": EMAIL_POLICY}
        return HTMLResponse(email_document(draft.html, scheme), headers=headers)
