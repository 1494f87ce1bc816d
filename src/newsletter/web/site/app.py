"""`newsletter serve`: HTTP requests in; one-click unsubscribes (RFC 8058) and archive pages out.

Routes (all answers carry the security headers; see `Guard`):

    GET  /                       the archive: every issue (number, title, date)
    GET  /issues/{n}             issue n as a web page, from the email's own rendering
    GET  /feed.xml               the archive's Atom feed (feed.py)
    GET  /issues/{image}         an image under issues/ that a published issue shows
    GET  /unsubscribe            public page: how to unsubscribe (the archive's footer link)
    GET  /unsubscribe/{token}    confirm page with one button; never unsubscribes (scanners GET)
    POST /unsubscribe/{token}    body exactly List-Unsubscribe=One-Click: suppress, answer 200
    POST /resubscribe/{token}    body exactly Resubscribe=Yes: undo the reader's own unsubscribe
    *    /r/{token}              a tracked link: its event kept, a redirect to it (redirect.py)
    GET  /signup, POST /signup, POST /api/signup, ...   signup (signup.py)
    GET, POST /confirm/{token}, /move/{token}   the site mail's links (confirm.py)
    GET, POST /preferences/{token}   the reader's lists and address (preferences.py)
    POST /webhooks/{provider}    providers' bounces and complaints, verified first (hooks.py)
    GET  /healthz, /robots.txt   (/healthz?probe=WORD also proves the secret: see healthz)

The token is the only credential (mailbox providers POST without cookies), so it is verified
(HMAC, constant time) before anything is read or written, and never logged. Suppressions go to
the outbox the sender reads (the process keeps one connection to it, see connection.py), so the
next send skips the address. A token of an address erased on request (forgetting.py) still gets
"unsubscribed" and writes nothing: the hash alone keeps them from being mailed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from newsletter import links
from newsletter.config.settings import Settings
from newsletter.database import Database, Suppression, database_exists
from newsletter.draft import sent_dates
from newsletter.errors import IssueNotFoundError, NewsletterError, TokenError
from newsletter.i18n import PAGES, strings_for
from newsletter.mail.tokens import SigningKey, health_proof, verify
from newsletter.signup.intake import READER_SOURCES
from newsletter.web.listen import LOOPBACK_NAMES, NO_STORE
from newsletter.web.site.archive import Archive
from newsletter.web.site.clickwriter import ClickWriter
from newsletter.web.site.clientip import trusted_networks
from newsletter.web.site.confirm import LinkPages
from newsletter.web.site.connection import DatabaseThread
from newsletter.web.site.feed import MEDIA_TYPE as FEED_MEDIA_TYPE
from newsletter.web.site.guard import MAX_BODY, Guard, error_log
from newsletter.web.site.hooks import Webhooks
from newsletter.web.site.pages import render_page
from newsletter.web.site.preferences import PreferencePages
from newsletter.web.site.redirect import METHODS, Redirects
from newsletter.web.site.signup import Defences, SignupPages
from newsletter.webhooks.ses import Fetch, fetch_https

T = TypeVar("T")

ONE_CLICK = [("List-Unsubscribe", "One-Click")]
RESUBSCRIBE = [("Resubscribe", "Yes")]

# An issue page is the email: its inline styles, and images from anywhere over HTTPS.
ISSUE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; form-action 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
PUBLIC = {"cache-control": "public, max-age=300"}
ROBOTS = (
    "User-agent: *\nDisallow: /unsubscribe/\nDisallow: /resubscribe/\nDisallow: /r/\n"
    "Disallow: /confirm/\nDisallow: /move/\nDisallow: /preferences/\nDisallow: /api/\n"
)


@dataclass(frozen=True)
class Target:
    """Who a verified token names: an address on a configured list."""

    list_name: str
    address: str
    list_label: str


class Service:
    """The endpoints; those about a reader share the process's one outbox connection."""

    def __init__(
        self,
        settings: Settings,
        keys: Sequence[bytes],
        database: DatabaseThread,
        defences: Defences,
        clicks: ClickWriter | None = None,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.database = database
        self.defences = defences  # the signup's: its consent ledger notes unsubscribes too
        self.archive = Archive(settings, self._sent_dates)
        self.clicks = clicks or ClickWriter(database)
        self.redirects = Redirects(settings, keys, database, self.archive, self.clicks)

    def page(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """A page about one reader (or an error): never kept by a cache on the way."""
        return HTMLResponse(render_page(template, self.settings, **context), status, NO_STORE)

    async def index(self, request: Request) -> Response:
        return HTMLResponse(await run_in_threadpool(self.archive.index_page), headers=PUBLIC)

    async def issue(self, request: Request) -> Response:
        number: int = request.path_params["number"]
        if not await run_in_threadpool(self.archive.is_published, number):
            raise HTTPException(404)
        try:
            html = await run_in_threadpool(self.archive.issue_page, number)
        except IssueNotFoundError:
            raise HTTPException(404) from None
        except NewsletterError as exc:
            # The editor's mistake, told to the editor (server log), not to the reader.
            error_log.error("issue %d cannot be shown: %s", number, exc.message)
            raise HTTPException(500) from None
        return HTMLResponse(html, headers={**PUBLIC, "content-security-policy": ISSUE_CSP})

    async def feed(self, request: Request) -> Response:
        xml = await run_in_threadpool(self.archive.feed)
        return Response(xml, media_type=f"{FEED_MEDIA_TYPE}; charset=utf-8", headers=PUBLIC)

    async def image(self, request: Request) -> Response:
        """An image under issues/ that a published issue shows (the emails link it here)."""
        path = await run_in_threadpool(self.archive.image_file, request.path_params["path"])
        if path is None:
            raise HTTPException(404)
        return FileResponse(path, headers=PUBLIC)

    async def how_to_unsubscribe(self, request: Request) -> Response:
        # Relative links throughout: they stay right when a proxy serves us below a path prefix.
        page = self.archive.how_to_unsubscribe_page(archive_href="./")
        return HTMLResponse(page, headers=NO_STORE)

    async def confirm(self, request: Request) -> Response:
        target = self._target(request)
        found = await self._database(
            lambda ob: ob.suppressions.get(target.list_name, target.address)
        )
        if found is not None:
            return self._done(request, target, found)
        # No form action: the browser posts back to this very URL, whatever proxy path it has.
        return self.page(
            "confirm.html",
            address=target.address,
            list_label=target.list_label,
            preferences_href=_preferences_href(request),
        )

    async def one_click(self, request: Request) -> Response:
        target = self._target(request)
        await _expect_form(request, ONE_CLICK)
        # Browsers send Origin with every form POST; mailbox providers' one-click POSTs do not.
        source = "web" if "origin" in request.headers else "one-click"

        asker = self.defences.asker(request, f"/unsubscribe ({source})")

        def record(ob: Database) -> tuple[bool, Suppression | None]:
            if self.defences.intake.forgotten(ob.backend, target.address):
                # Erased on request: never mailed again, and a forwarded issue or a cached
                # one-click URL must not write the address back (no suppression, no event).
                return False, None
            added = ob.suppressions.add(target.list_name, target.address, source)
            if added:
                self.defences.intake.note(
                    ob, target.list_name, target.address, "unsubscribe", asker
                )
            return added, ob.suppressions.get(target.list_name, target.address)

        added, found = await self._database(record)
        request.state.event = "unsubscribed" if added else "already-unsubscribed"
        request.state.list = target.list_name
        if _wants_html(request):
            return self._done(request, target, found)
        return PlainTextResponse("unsubscribed\n", headers=NO_STORE)

    async def resubscribe(self, request: Request) -> Response:
        target = self._target(request)
        await _expect_form(request, RESUBSCRIBE)

        asker = self.defences.asker(request, "/resubscribe")

        def undo(ob: Database) -> bool:
            if self.defences.intake.forgotten(ob.backend, target.address):
                return True  # erased on request: refused, and nothing written
            if ob.suppressions.remove(target.list_name, target.address, sources=READER_SOURCES):
                self.defences.intake.note(
                    ob, target.list_name, target.address, "resubscribe", asker
                )
            return ob.suppressions.contains(target.list_name, target.address)

        request.state.list = target.list_name
        if await self._database(undo):
            request.state.event = "resubscribe-refused"
            text = strings_for(PAGES, self.settings.newsletter.language)
            return self.page(
                "problem.html", 409, title=text["error_title"], lead=text["resubscribe_refused"]
            )
        request.state.event = "resubscribed"
        return self.page("resubscribed.html", address=target.address, list_label=target.list_label)

    async def healthz(self, request: Request) -> Response:
        """`ok`; with ?probe=WORD also `proof VALUE`, the proof that this serve has the secret
        (mail/tokens.py's health_proof), which `newsletter doctor` checks against its own."""
        proof = health_proof(self.keys[0], request.query_params.get("probe", ""))
        body = "ok\n" if proof is None else f"ok\nproof {proof}\n"
        return PlainTextResponse(body, headers=NO_STORE)

    async def robots(self, request: Request) -> Response:
        return PlainTextResponse(ROBOTS, headers=PUBLIC)

    def _done(self, request: Request, target: Target, found: Suppression | None) -> HTMLResponse:
        token = request.path_params["token"]
        return self.page(
            "done.html",
            address=target.address,
            list_label=target.list_label,
            # Only the reader's own unsubscribe can be undone here, not the editor's.
            can_undo=found is None or found.source in READER_SOURCES,
            # Relative, so it also works when a proxy serves us below a path prefix.
            resubscribe_action=f"../resubscribe/{token}",
            preferences_href=_preferences_href(request),
        )

    def _target(self, request: Request) -> Target:
        token: str = request.path_params["token"]
        try:
            list_name, address = verify(self.keys, token)
        except TokenError:
            raise HTTPException(403) from None
        mailing_list = self.settings.lists.get(list_name)
        if mailing_list is None:
            # Genuine, but for a list this project does not have: nothing to unsubscribe from.
            raise HTTPException(403)
        label = mailing_list.name or self.settings.newsletter.name
        return Target(list_name, address, label)

    async def _database(self, action: Callable[[Database], T]) -> T:
        return await self.database.run(action)

    def _sent_dates(self, include_staging: bool) -> dict[int, dt.date]:
        """For the archive (on a request's worker thread): read on the kept connection."""
        if not database_exists(self.settings.database_target):
            return {}  # nothing sent yet, and a page view creates no log
        return self.database.call(
            lambda ob: sent_dates(self.settings, include_staging=include_staging, database=ob)
        )

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        text = strings_for(PAGES, self.settings.newsletter.language)
        key = {400: "bad_request", 403: "invalid", 404: "not_found", 405: "bad_request"}.get(
            exc.status_code, "too_large" if exc.status_code == 413 else "error"
        )
        html = render_page(
            "problem.html", self.settings, title=text[f"{key}_title"], lead=text[f"{key}_lead"]
        )
        return HTMLResponse(html, exc.status_code, headers={**(exc.headers or {}), **NO_STORE})

    async def server_error(self, request: Request, exc: Exception) -> Response:
        return await self.http_error(request, HTTPException(500))


async def _expect_form(request: Request, expected: list[tuple[str, str]]) -> None:
    """The body must be exactly the `expected` fields, urlencoded or multipart; else 400."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()  # read through Guard's size limit before any parsing
    fields: list[tuple[str, Any]]
    if media in ("", "application/x-www-form-urlencoded"):
        try:
            text = body.decode("ascii").strip()
            fields = parse_qsl(text, keep_blank_values=True, strict_parsing=True, max_num_fields=4)
        except (UnicodeDecodeError, ValueError):
            raise HTTPException(400) from None
    elif media == "multipart/form-data":
        form = await request.form(max_files=0, max_fields=4, max_part_size=MAX_BODY)
        fields = list(form.multi_items())
        if any(isinstance(value, UploadFile) for _, value in fields):
            raise HTTPException(400)
    else:
        raise HTTPException(400)
    if fields != expected:
        raise HTTPException(400)


def _preferences_href(request: Request) -> str:
    """The preference page of the token in the path (relative, as every link of ours)."""
    return f"../preferences/{request.path_params['token']}"


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def create_app(
    settings: Settings,
    secret: bytes,
    *,
    previous: Sequence[bytes] = (),
    body_timeout: float | None = None,
    database: DatabaseThread | None = None,
    clicks: ClickWriter | None = None,
    fetch: Fetch = fetch_https,
) -> Guard:
    """The service as an ASGI app; `secret` must be the key the sender signs tokens with,
    `previous` the earlier ones whose tokens are still out there. `outbox` is the connection
    the caller closes (by default one of the app's own, opened at the first request); a body
    must have arrived `body_timeout` seconds after its head (default: [serve] timeout);
    `clicks` writes the click events (the caller flushes it; by default the app's own);
    `fetch` gets the SNS certificates and confirmation URLs for SES's webhook (a test's own)."""
    database = database or DatabaseThread(
        settings.database_target, settings.outbox.durability, settings.outbox.lock_wait
    )
    keys = (secret, *previous)
    signing = SigningKey(secret, ephemeral=False, previous=tuple(previous))
    defences = Defences(settings, signing, database)
    service = Service(settings, keys, database, defences, clicks)
    app = Starlette(
        routes=[
            *SignupPages(settings, defences).routes(),
            *LinkPages(settings, keys, defences).routes(),
            *PreferencePages(settings, keys, defences).routes(),
            *Webhooks(settings, keys, database, fetch).routes(),
            Route(links.INDEX_PATH, service.index),
            Route(links.ISSUE_PATH, service.issue),
            Route(links.ISSUE_PATH + "/", service.issue),
            Route(links.FEED_PATH, service.feed),
            Route(links.ISSUE_FILE_PATH, service.image),
            Route(links.HOW_TO_UNSUBSCRIBE_PATH, service.how_to_unsubscribe),
            Route(links.UNSUBSCRIBE_PATH, service.confirm, methods=["GET"]),
            Route(links.UNSUBSCRIBE_PATH, service.one_click, methods=["POST"]),
            Route(links.RESUBSCRIBE_PATH, service.resubscribe, methods=["POST"]),
            Route(links.CLICK_PATH, service.redirects.click, methods=METHODS),
            Route(links.HEALTH_PATH, service.healthz),
            Route(links.ROBOTS_PATH, service.robots),
        ],
        exception_handlers={HTTPException: service.http_error, Exception: service.server_error},
    )
    # The proxy passes the public name on (base_url's host); loopback names for health checks.
    hosts = [urlsplit(settings.newsletter.base_url).hostname or "", *LOOPBACK_NAMES]
    timeout = settings.serve.timeout if body_timeout is None else body_timeout
    trusted = trusted_networks(tuple(settings.serve.trusted_proxies))
    return Guard(app, hosts=hosts, body_timeout=timeout, trusted=trusted)
