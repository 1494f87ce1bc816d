"""The preference page, reached from the unsubscribe page with the reader's unsubscribe token: the
lists they get, and a change of address (the new one confirmed first).

    GET  /preferences/{token}   the lists (the token's and those that take signups), each
                                ticked or not; a form for a new address
    POST /preferences/{token}   action=lists with the ticked `list` fields: applied at once;
                                action=move with email (and the proof of work): a change mail
                                to the new address (signup/preferences.py)

A change of address goes through the signup's defences (rate limits, the form, the proof of
work, the domain, the mailbox's claim) and is answered alike whatever happened after the domain
check. The token is verified before anything is read, as on the unsubscribe page. A token of an
address erased on request shows every list off and changes nothing (signup/preferences.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.errors import TokenError
from newsletter.i18n import PAGES, strings_for
from newsletter.links import PREFERENCES_PATH
from newsletter.mail.tokens import verify
from newsletter.signup.preferences import choose, current, offered, request_move
from newsletter.web.listen import NO_STORE
from newsletter.web.site.pages import render_page
from newsletter.web.site.signup import SCRIPT_CSP, Answer, AnswerKind, Defences, form_fields

MAX_LISTS = 32


class PreferencePages:
    def __init__(self, settings: Settings, keys: Sequence[bytes], defences: Defences) -> None:
        self.settings = settings
        self.keys = keys
        self.defences = defences
        self.words = strings_for(PAGES, settings.newsletter.language)

    def routes(self) -> list[Route]:
        return [
            Route(PREFERENCES_PATH, self.page, methods=["GET"]),
            Route(PREFERENCES_PATH, self.post, methods=["POST"]),
        ]

    async def page(self, request: Request) -> Response:
        list_name, key = self._target(request)
        shown = await self.defences.database.run(
            lambda ob: current(self.defences.intake, ob, list_name, key)
        )
        return self._page(shown)

    async def post(self, request: Request) -> Response:
        list_name, key = self._target(request)
        request.state.list = list_name
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in ("", "application/x-www-form-urlencoded", "multipart/form-data"):
            raise HTTPException(400)
        # The body is read once, by whichever step needs it.
        try:
            fields = await form_fields(request)
        except ValueError:
            raise HTTPException(400) from None
        action = [v for k, v in fields if k == "action"]
        rest = [(k, v) for k, v in fields if k != "action"]
        if action == ["lists"]:
            return await self._lists(request, list_name, key, rest)
        if action == ["move"]:
            return await self._move(request, list_name, key, rest)
        raise HTTPException(400)

    async def _lists(
        self, request: Request, list_name: str, key: str, fields: list[tuple[str, Any]]
    ) -> Response:
        if len(fields) > MAX_LISTS or any(k != "list" for k, _ in fields):
            raise HTTPException(400)
        allowed = set(offered(self.settings, list_name))
        wanted = {str(v) for _, v in fields}
        if not wanted <= allowed:
            raise HTTPException(400)
        asker = self.defences.asker(request, "/preferences")
        intake = self.defences.intake

        def apply(ob: Database) -> list[Any]:
            return choose(intake, ob, list_name, key, wanted, asker)

        shown = await self.defences.database.run(apply)
        request.state.event = "preferences:lists"
        return self._page(shown, note=self.words["prefs_saved"])

    async def _move(
        self, request: Request, list_name: str, key: str, fields: list[tuple[str, Any]]
    ) -> Response:
        async def read(_: Request) -> list[tuple[str, Any]]:
            return [*fields, ("list", list_name)]

        checked = await self.defences.checked(request, read, [list_name])
        if isinstance(checked, Answer):
            request.state.event = f"preferences:move:{checked.verdict}"
            if checked.verdict is AnswerKind.ACCEPTED:  # the honeypot
                return await self._after_move(list_name, key)
            if checked.verdict is AnswerKind.SLOW_DOWN:
                raise HTTPException(429, headers={"retry-after": "60"})
            if checked.verdict is AnswerKind.MALFORMED:
                raise HTTPException(400)
            problem = (
                self.words["try_again_lead"]
                if checked.verdict is AnswerKind.TRY_AGAIN
                else self.words["bad_address_lead"].format(reason=checked.reason)
            )
            shown = await self.defences.database.run(
                lambda ob: current(self.defences.intake, ob, list_name, key)
            )
            return self._page(shown, problem=problem, status=400)
        asker = self.defences.asker(request, "/preferences")
        intake = self.defences.intake
        what = await self.defences.database.run(
            lambda ob: request_move(intake, ob, list_name, key, checked.address, asker)
        )
        request.state.event = f"preferences:move:{what}"
        return await self._after_move(list_name, key)

    async def _after_move(self, list_name: str, key: str) -> Response:
        shown = await self.defences.database.run(
            lambda ob: current(self.defences.intake, ob, list_name, key)
        )
        return self._page(shown, note=self.words["prefs_change_sent"])

    def _target(self, request: Request) -> tuple[str, str]:
        token: str = request.path_params["token"]
        try:
            list_name, key = verify(self.keys, token)
        except TokenError:
            raise HTTPException(403) from None
        if list_name not in self.settings.lists:
            raise HTTPException(403)
        return list_name, key

    def _page(
        self, shown: list[Any], *, note: str = "", problem: str = "", status: int = 200
    ) -> Response:
        html = render_page(
            "preferences.html",
            self.settings,
            choices=shown,
            note=note,
            problem=problem,
            # Relative to /preferences/TOKEN: right below a proxy's path prefix too.
            challenge_href="../signup/challenge",
            script_href="../static/proof-of-work.js",
        )
        return HTMLResponse(html, status, {**NO_STORE, "content-security-policy": SCRIPT_CSP})
