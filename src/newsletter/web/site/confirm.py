"""The links in the site's own mail: a link token in; a page that acts only by POST out.

    GET  /confirm/{token}   a signup's confirmation page: one button (confirm.js presses it
                            once the page is shown to someone); never confirms
    POST /confirm/{token}   body exactly Confirm=Yes: the subscriber confirmed (signup/intake.py);
                            after an unsubscribe, or a stop by the editor or a bounce, a page
                            that says so (and how to come back), never "subscribed"
    GET  /move/{token}      an address change's page, the same way
    POST /move/{token}      body exactly Move=Yes: the old address's lists moved to this one,
                            once (the link's nonce is used up; again: 409)

Link scanners (Defender Safe Links, Mimecast, ...) open every link of a mail as it arrives: a GET
here changes nothing, so a scanner confirms nobody. The token is verified (single purpose,
expiry) before anything is read; a forged or altered one gets 403, an expired one 410 with the
way back (sign up again), and both pages are in the newsletter's language.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from newsletter.config.settings import Settings
from newsletter.errors import LinkExpiredError, TokenError
from newsletter.i18n import PAGES, strings_for
from newsletter.links import CONFIRM_PATH, MOVE_PATH, signup_url
from newsletter.mail.tokens import LinkTarget, Purpose, verify_link
from newsletter.signup.intake import Confirmation
from newsletter.signup.preferences import move
from newsletter.web.listen import NO_STORE
from newsletter.web.site.pages import render_page
from newsletter.web.site.signup import SCRIPT_CSP, Defences

_FIELDS = {Purpose.CONFIRM: "Confirm", Purpose.CHANGE: "Move"}
# A confirmation that leaves the reader unsubscribed says so, and how to come back if they can.
_NOT_SUBSCRIBED = {
    Confirmation.UNSUBSCRIBED: ("confirm_left_title", "confirm_left_lead"),
    Confirmation.SUPPRESSED: ("confirm_stopped_title", "confirm_stopped_lead"),
}


class LinkPages:
    def __init__(self, settings: Settings, keys: Sequence[bytes], defences: Defences) -> None:
        self.settings = settings
        self.keys = keys
        self.defences = defences
        self.words = strings_for(PAGES, settings.newsletter.language)

    def routes(self) -> list[Route]:
        return [
            Route(CONFIRM_PATH, self.confirm_page, methods=["GET"]),
            Route(CONFIRM_PATH, self.confirm, methods=["POST"]),
            Route(MOVE_PATH, self.move_page, methods=["GET"]),
            Route(MOVE_PATH, self.move, methods=["POST"]),
        ]

    async def confirm_page(self, request: Request) -> Response:
        target = self._target(request, Purpose.CONFIRM)
        if isinstance(target, Response):
            return target
        lead = self.words["join_lead"].format(list=self._label(target.list_name))
        return self._button(Purpose.CONFIRM, "join_title", lead, "join_button")

    async def confirm(self, request: Request) -> Response:
        await _expect(request, _FIELDS[Purpose.CONFIRM])
        target = self._target(request, Purpose.CONFIRM)
        if isinstance(target, Response):
            return target
        asker = self.defences.asker(request, "/confirm")
        intake = self.defences.intake
        done = await self.defences.database.run(lambda ob: intake.confirm(ob, target, asker))
        request.state.event = f"confirm:{done}"
        request.state.list = target.list_name
        if done is Confirmation.STALE:
            return self._problem(410, "link_expired_title", "link_stale_lead")
        label = self._label(target.list_name)
        if done in _NOT_SUBSCRIBED:
            title, lead = _NOT_SUBSCRIBED[done]
            html = render_page(
                "problem.html",
                self.settings,
                title=self.words[title],
                lead=self.words[lead].format(list=label),
            )
            return HTMLResponse(html, 200, NO_STORE)
        return self._done("joined_title", self.words["joined_lead"].format(list=label))

    async def move_page(self, request: Request) -> Response:
        target = self._target(request, Purpose.CHANGE)
        if isinstance(target, Response):
            return target
        return self._button(Purpose.CHANGE, "move_title", self.words["move_lead"], "move_button")

    async def move(self, request: Request) -> Response:
        await _expect(request, _FIELDS[Purpose.CHANGE])
        target = self._target(request, Purpose.CHANGE)
        if isinstance(target, Response):
            return target
        asker = self.defences.asker(request, "/move")
        intake = self.defences.intake
        moved = await self.defences.database.run(lambda ob: move(intake, ob, target, asker))
        if moved is None:  # used once already: a change link moves the address once
            request.state.event = "move:stale"
            return self._problem(409, "link_used_title", "link_used_lead")
        request.state.event = f"move:{len(moved)}"
        return self._done("moved_title", self.words["moved_lead"])

    def _target(self, request: Request, purpose: Purpose) -> LinkTarget | Response:
        token: str = request.path_params["token"]
        try:
            target = verify_link(self.keys, token, purpose, time.time())
        except LinkExpiredError:
            return self._problem(410, "link_expired_title", "link_expired_lead")
        except TokenError:
            return self._problem(403, "invalid_title", "link_invalid_lead")
        if target.list_name not in self.settings.lists:
            return self._problem(403, "invalid_title", "link_invalid_lead")
        return target

    def _label(self, list_name: str) -> str:
        return self.settings.lists[list_name].name or self.settings.newsletter.name

    def _button(self, purpose: Purpose, title: str, lead: str, button: str) -> Response:
        html = render_page(
            "join.html",
            self.settings,
            title=self.words[title],
            lead=lead,
            button=self.words[button],
            field=_FIELDS[purpose],
            # Relative: right below a proxy's path prefix too (/confirm/TOKEN -> /static/...).
            script_href="../static/confirm.js",
        )
        return HTMLResponse(html, 200, {**NO_STORE, "content-security-policy": SCRIPT_CSP})

    def _done(self, title: str, lead: str) -> Response:
        html = render_page(
            "joined.html",
            self.settings,
            title=self.words[title],
            lead=lead,
            archive_href=self.settings.newsletter.base_url.rstrip("/") + "/",
        )
        return HTMLResponse(html, 200, NO_STORE)

    def _problem(self, status: int, title: str, lead: str) -> Response:
        words = self.words
        text = words[lead]
        if status == 410 and self.settings.signup_lists:
            text += " " + signup_url(self.settings.newsletter.base_url)
        html = render_page("problem.html", self.settings, title=words[title], lead=text)
        return HTMLResponse(html, status, NO_STORE)


async def _expect(request: Request, field: str) -> None:
    """The body must be exactly `field=Yes`, urlencoded (the page's own form); else 400."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in ("", "application/x-www-form-urlencoded"):
        raise HTTPException(400)
    try:
        text = (await request.body()).decode("ascii").strip()
        fields = parse_qsl(text, keep_blank_values=True, strict_parsing=True, max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        raise HTTPException(400) from None
    if fields != [(field, "Yes")]:
        raise HTTPException(400)
