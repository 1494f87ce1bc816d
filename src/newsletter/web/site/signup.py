"""Signup on the site: a stranger's POST in (the page's form, a form embedded in another site, or
the JSON endpoint); the same defences in the same order for all, then one answer out.

    GET  /signup              the page: the form, the consent text, our proof-of-work script
    POST /signup              the form's POST (also an embedded form's, from another site)
    POST /api/signup          the same fields as a JSON object; answered in JSON
    GET  /signup/challenge    a proof-of-work challenge (JSON; any origin may ask)
    GET  /signup/embed        the HTML of a form to paste into another page
    GET  /static/{script}     proof-of-work.js, confirm.js

`Defences.attempt` is the order, each step a call of its own (signup/*.py): the client's
address through `[serve] trusted_proxies`, its own rate limit (before the body is read), the
size limit (Guard), the form and its honeypot (answered as accepted, nothing done), the proof
of work (a signature and one hash; each challenge once), the site's rate limit (only a request
whose work held may spend the site's allowance: junk from many addresses cannot), the domain,
then the signup's transaction (signup/intake.py). From the domain check on,
every way out is answered alike: the visitor cannot tell a new address from a pending, a
confirmed, a suppressed or a forgotten one. Before it, what went wrong says nothing about any
address (the form's own typo, an expired challenge, too many requests), so it is said.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from newsletter import links
from newsletter.config.settings import Settings
from newsletter.i18n import PAGES, strings_for
from newsletter.links import signup_url
from newsletter.mail.tokens import SigningKey
from newsletter.signup.challenge import ProofOfWork
from newsletter.signup.domains import DomainCheck
from newsletter.signup.form import MAX_FIELDS, FormRefusal, FormVerdict, Signup, read_signup
from newsletter.signup.intake import Intake, consent_text
from newsletter.signup.intake import Request as Asker
from newsletter.signup.limits import RequestLimiter
from newsletter.web.listen import NO_STORE
from newsletter.web.site.clientip import scope_client_ip, trusted_networks
from newsletter.web.site.connection import DatabaseThread
from newsletter.web.site.pages import render_page

STATIC = Path(__file__).resolve().parent / "static"
SCRIPTS = ("proof-of-work.js", "confirm.js")
# Pages that run our scripts: from our own origin only, and they may fetch from it.
SCRIPT_CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
ANY_ORIGIN = {"access-control-allow-origin": "*"}


class AnswerKind(StrEnum):
    ACCEPTED = "accepted"  # said alike for every address past the domain check
    SLOW_DOWN = "slow-down"  # a rate limit
    TRY_AGAIN = "try-again"  # the proof of work is missing, wrong, expired or used
    BAD_ADDRESS = "bad-address"  # its syntax, or its domain takes no mail
    MALFORMED = "malformed"  # not our form at all


@dataclass(frozen=True)
class Answer:
    verdict: AnswerKind
    reason: str = ""  # for the visitor: the address's fault, if it is one
    retry_after: float = 0.0
    detail: str = ""  # for the log and tests only (never shown): what happened
    email: str = ""  # the address posted, to fill the form again


Fields = Callable[[Request], Awaitable[list[tuple[str, Any]]]]


class Defences:
    """The signup's defences, one set per process (the limits and replays live in memory)."""

    def __init__(self, settings: Settings, key: SigningKey, database: DatabaseThread) -> None:
        config = settings.signup
        self.settings = settings
        self.database = database
        self.limits = RequestLimiter(
            per_client_per_minute=config.per_client_per_minute,
            per_client_burst=config.per_client_burst,
            site_per_minute=config.site_per_minute,
            site_burst=config.site_burst,
        )
        self.work = ProofOfWork(key.secret, cost=config.work_cost, expiry=config.challenge_expiry)
        self.intake = Intake(settings, key)
        self.trusted = trusted_networks(tuple(settings.serve.trusted_proxies))
        self._domains: DomainCheck | None = None

    def client(self, request: Request) -> str | None:
        return scope_client_ip(request.scope, self.trusted)

    def asker(self, request: Request, source: str) -> Asker:
        return Asker(self.client(request), request.headers.get("user-agent", ""), source)

    @property
    def domains(self) -> DomainCheck:
        if self._domains is None:  # made in the event loop that uses it
            self._domains = DomainCheck(self.settings.signup)
        return self._domains

    async def checked(
        self, request: Request, read: Fields, lists: Iterable[str]
    ) -> Signup | Answer:
        """The steps up to the domain check: a Signup that passed them, or the Answer."""
        client = self.client(request) or "unknown"
        decision = self.limits.allow_client(client)
        if not decision.allowed:
            return Answer(
                AnswerKind.SLOW_DOWN, retry_after=decision.retry_after, detail=decision.scope
            )
        try:
            fields = await read(request)
        except ValueError as exc:
            return Answer(AnswerKind.MALFORMED, detail=str(exc))
        posted = next((str(v) for k, v in fields if k == "email" and isinstance(v, str)), "")
        form = read_signup(fields, frozenset(lists))
        if isinstance(form, FormRefusal):
            if form.verdict is FormVerdict.HONEYPOT:
                return Answer(AnswerKind.ACCEPTED, detail="honeypot")
            if form.verdict is FormVerdict.BAD_ADDRESS:
                return Answer(AnswerKind.BAD_ADDRESS, form.reason, detail=form.reason, email=posted)
            return Answer(AnswerKind.MALFORMED, detail=form.reason)
        # On the event loop: a worker thread for the derivation measured slower (benchmarks/
        # serve.py), the GIL going back and forth between the loop and the pool.
        work = self.work.verify(form.payload)
        if not work.accepted:
            return Answer(AnswerKind.TRY_AGAIN, detail=f"work {work.verdict}", email=posted)
        decision = self.limits.allow_site(client)
        if not decision.allowed:
            return Answer(
                AnswerKind.SLOW_DOWN, retry_after=decision.retry_after, detail=decision.scope
            )
        domain = await self.domains.check(form.address)
        if domain.refused:
            # Said in the page's language; the log keeps the English reason.
            words = strings_for(PAGES, self.settings.newsletter.language)
            said = words.get(f"domain_{domain.kind}", domain.reason)
            said = said.replace("{domain}", domain.domain)
            return Answer(AnswerKind.BAD_ADDRESS, said, detail=domain.reason, email=posted)
        return form

    async def attempt(self, request: Request, read: Fields, source: str) -> Answer:
        """Every defence, then the signup's transaction (see the module docstring)."""
        checked = await self.checked(request, read, self.settings.signup_lists)
        if isinstance(checked, Answer):
            return checked
        asker = self.asker(request, source)
        what = await self.database.run(lambda ob: self.intake.enrol(ob, checked, asker))
        return Answer(AnswerKind.ACCEPTED, detail=what.value)


async def form_fields(request: Request) -> list[tuple[str, Any]]:
    """A form's fields, urlencoded or multipart (no files); ValueError if it is neither."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in ("", "application/x-www-form-urlencoded"):
        body = await request.body()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the body is not UTF-8") from None
        return parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS * 3)
    if media == "multipart/form-data":
        form = await request.form(max_files=0, max_fields=MAX_FIELDS * 3)
        pairs = list(form.multi_items())
        if any(isinstance(value, UploadFile) for _, value in pairs):
            raise ValueError("files are not taken")
        return pairs
    raise ValueError(f"a form is urlencoded, not {media}")


async def json_fields(request: Request) -> list[tuple[str, Any]]:
    """The JSON endpoint's fields: one object of strings; ValueError for anything else."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise ValueError("the body must be application/json")
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise ValueError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    return list(data.items())


class SignupPages:
    """The routes of the module docstring."""

    def __init__(self, settings: Settings, defences: Defences) -> None:
        self.settings = settings
        self.defences = defences
        self.words = strings_for(PAGES, settings.newsletter.language)

    def routes(self) -> list[Route]:
        return [
            Route(links.SIGNUP_PATH, self.page, methods=["GET"]),
            Route(links.SIGNUP_PATH, self.post, methods=["POST"]),
            Route(links.SIGNUP_CHALLENGE_PATH, self.challenge, methods=["GET"]),
            Route(links.SIGNUP_EMBED_PATH, self.embed, methods=["GET"]),
            Route(links.SIGNUP_API_PATH, self.api, methods=["POST"]),
            Route(links.SIGNUP_API_PATH, self.api_options, methods=["OPTIONS"]),
            Route(links.STATIC_PATH, self.static, methods=["GET"]),
        ]

    def _lists(self) -> list[tuple[str, str]]:
        lists = self.settings.lists
        return [
            (name, lists[name].name or self.settings.newsletter.name)
            for name in self.settings.signup_lists
        ]

    def _off(self) -> HTMLResponse:
        """The 404 of a site with no list taking signups: it names the setting that opens
        them (in the config's words, the same in every language), for the editor who tries
        /signup before setting it (issue 41)."""
        table = f"[lists.{_open_first(self.settings)}]"
        lead = f"{self.words['signup_off_lead']} (newsletter.toml, {table}: signup = true)"
        title = self.words["not_found_title"]
        html = render_page("problem.html", self.settings, title=title, lead=lead)
        return HTMLResponse(html, 404, NO_STORE)

    def _page(self, status: int = 200, *, problem: str = "", email: str = "") -> HTMLResponse:
        if not self.settings.signup_lists:
            return self._off()
        html = render_page(
            "signup.html",
            self.settings,
            lists=self._lists(),
            action="signup",
            challenge_href="signup/challenge",
            script_href="static/proof-of-work.js",
            consent=consent_text(self.settings).text,
            problem=problem,
            email=email,
            hide_signup=True,
        )
        return HTMLResponse(html, status, {**NO_STORE, "content-security-policy": SCRIPT_CSP})

    async def page(self, request: Request) -> Response:
        return self._page()

    async def post(self, request: Request) -> Response:
        if not self.settings.signup_lists:
            return self._off()
        answer = await self.defences.attempt(request, form_fields, links.SIGNUP_PATH)
        _note(request, answer)
        words = self.words
        if answer.verdict is AnswerKind.ACCEPTED:
            html = render_page("sent.html", self.settings, sender=self._sender())
            return HTMLResponse(html, 200, NO_STORE)
        if answer.verdict is AnswerKind.SLOW_DOWN:
            return _problem(
                self.settings, 429, words["slow_down_title"], words["slow_down_lead"], answer
            )
        if answer.verdict is AnswerKind.TRY_AGAIN:
            return self._page(400, problem=words["try_again_lead"], email=answer.email)
        if answer.verdict is AnswerKind.BAD_ADDRESS:
            lead = words["bad_address_lead"].format(reason=answer.reason)
            return self._page(400, problem=lead, email=answer.email)
        raise HTTPException(400)

    async def api(self, request: Request) -> Response:
        if not self.settings.signup_lists:
            raise HTTPException(404)
        answer = await self.defences.attempt(request, json_fields, links.SIGNUP_API_PATH)
        _note(request, answer)
        words = self.words
        if answer.verdict is AnswerKind.ACCEPTED:
            body = {"status": "accepted", "message": words["sent_lead"]}
            return JSONResponse(body, 202, {**NO_STORE, **ANY_ORIGIN})
        message = {
            AnswerKind.SLOW_DOWN: words["slow_down_lead"],
            AnswerKind.TRY_AGAIN: words["try_again_lead"],
            AnswerKind.BAD_ADDRESS: words["bad_address_lead"].format(reason=answer.reason),
            AnswerKind.MALFORMED: words["bad_request_lead"],
        }[answer.verdict]
        status = 429 if answer.verdict is AnswerKind.SLOW_DOWN else 400
        headers = {**NO_STORE, **ANY_ORIGIN, **_retry(answer)}
        body = {"status": "refused", "reason": answer.verdict.value, "message": message}
        return JSONResponse(body, status, headers)

    async def api_options(self, request: Request) -> Response:
        """CORS preflight: a page anywhere may post JSON here (the defences are the same)."""
        headers = {
            **ANY_ORIGIN,
            "access-control-allow-methods": "POST",
            "access-control-allow-headers": "content-type",
            "access-control-max-age": "86400",
        }
        return Response(status_code=204, headers=headers)

    async def challenge(self, request: Request) -> Response:
        return JSONResponse(self.defences.work.challenge(), headers={**NO_STORE, **ANY_ORIGIN})

    async def embed(self, request: Request) -> Response:
        """The HTML to paste into another site's page (absolute URLs: it runs there)."""
        if not self.settings.signup_lists:
            return self._off()
        base = signup_url(self.settings.newsletter.base_url)
        text = render_page(
            "embed.txt",
            self.settings,
            action=base,
            challenge=f"{base}/challenge",
            script=self.settings.newsletter.base_url.rstrip("/")
            + links.fill(links.STATIC_PATH, name="proof-of-work.js"),
            list_name=self.settings.signup_lists[0],
            consent=consent_text(self.settings).text,
        )
        return PlainTextResponse(text, headers={"cache-control": "no-store"})

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in SCRIPTS:
            raise HTTPException(404)
        headers = {
            "cache-control": "public, max-age=3600",
            # Embedded forms on other sites load the proof of work from here.
            "cross-origin-resource-policy": "cross-origin",
            **ANY_ORIGIN,
        }
        body = (STATIC / name).read_bytes()
        return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)

    def _sender(self) -> str:
        return self.settings.newsletter.sender


def _note(request: Request, answer: Answer) -> None:
    """What happened, for the access log (the operator's; the visitor sees the same answer)."""
    request.state.event = f"signup:{answer.verdict}:{answer.detail}"[:80]


def _retry(answer: Answer) -> dict[str, str]:
    if answer.verdict is not AnswerKind.SLOW_DOWN:
        return {}
    return {"retry-after": str(max(1, round(answer.retry_after)))}


def _open_first(settings: Settings) -> str:
    """The list whose table would take `signup = true`: the first that is not a staging list."""
    return next((n for n, chosen in settings.lists.items() if not chosen.staging), "main")


def _problem(settings: Settings, status: int, title: str, lead: str, answer: Answer) -> Response:
    html = render_page("problem.html", settings, title=title, lead=lead)
    return HTMLResponse(html, status, {**NO_STORE, **_retry(answer)})
