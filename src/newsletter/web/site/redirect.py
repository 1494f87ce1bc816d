"""`GET /r/TOKEN` on `newsletter serve`: a tracked link's request in; a redirect to the link the
issue has at the token's place, and the request kept as a click event, out.

The token is verified before anything else (mail/clicktokens.py): a forged, altered or unknown
one is a 404 and redirects nowhere. A genuine one names a place, never a URL, and the URL is
the one the send recorded for that place (outbox/sentlinks.py), else the issue file's at that
place, else the issue's web version: so no request can be sent anywhere the issue does not link
(no open redirect). The canary and a box token whose URL digest no longer matches (the place
holds another link since) lead to the web version too.

The answer never waits for the event to be written: events go to a ClickWriter, which writes
them a batch at a time, and a failure to keep one costs the event, never the reader's redirect.
What is kept follows the mode the send was made with (the outbox records it with the send's
links), capped by `[tracking] clicks` as serve read it when that reading is the newer: a send
made after serve started follows its own mode, so a serve started with tracking off loses no
click of a send made with it on (issue 29); a serve (re)started after the send with tracking
turned down keeps less: nothing when it is "off", no row when it is "aggregate"
(docs/guide/tracking.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from newsletter.clicks.events import click_event, ip_key
from newsletter.config.settings import Settings, TrackingMode
from newsletter.database import Database
from newsletter.database.clicks import ClickRecord, StoredClick
from newsletter.errors import NewsletterError, TokenError
from newsletter.links import issue_url
from newsletter.mail.clicktokens import ClickTarget, verify_click
from newsletter.mail.tracking import PROBE_ROW
from newsletter.rendering.places import Place, Region, link_at
from newsletter.web.site.archive import Archive
from newsletter.web.site.clickwriter import ClickWriter
from newsletter.web.site.clientip import scope_client_ip, trusted_networks
from newsletter.web.site.connection import DatabaseThread
from newsletter.web.site.guard import EXTERNAL_LOCATION, error_log

# Every method: a scanner's HEAD or OPTIONS is an event too, and gets the same answer.
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]
LINKS_TTL = 30.0  # seconds a send's links are reused before they are read again
_LINK_CACHE = 256  # sends whose links are kept in memory
_HEADERS = {"cache-control": "no-store", "referrer-policy": "no-referrer"}


class Resolved(NamedTuple):
    """What the outbox says of a token: the send's list, its links, the row's delivery, and
    what may be kept of the click (see the module docstring)."""

    list_name: str | None
    links: Mapping[Place, str] | None
    row: int | None = None
    delivered_at: float | None = None  # the row's 250, in Unix seconds
    mode: TrackingMode | None = None  # None: [tracking] clicks as serve read it


class SendLinks(NamedTuple):
    """A tracked send as the redirect uses it: its links, and the mode its clicks are kept in."""

    links: Mapping[Place, str] | None
    mode: TrackingMode | None


class Redirects:
    """The /r/ route: verification, the link, the event."""

    def __init__(
        self,
        settings: Settings,
        keys: Sequence[bytes],
        database: DatabaseThread,
        archive: Archive,
        writer: ClickWriter,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.database = database
        self.archive = archive
        self.writer = writer
        self._ip_key = ip_key(keys[0])
        self._trusted = trusted_networks(tuple(settings.serve.trusted_proxies))
        # When serve read [tracking]: a send recorded later may have been made with another.
        self._read_at = dt.datetime.now(dt.UTC)
        # Touched on the outbox thread only.
        self._links: OrderedDict[tuple[int, str], tuple[float, SendLinks]] = OrderedDict()

    async def click(self, request: Request) -> Response:
        try:
            target = verify_click(self.keys, request.path_params["token"])
        except TokenError:
            raise HTTPException(404) from None
        at = time.time()
        try:
            found = await self.database.run(lambda database: self._resolve(database, target))
        except NewsletterError as exc:
            # The outbox out of reach: the reader is sent on all the same.
            error_log.error("a click could not be looked up: %s", exc.message)
            found = Resolved(target.list_name, None)
        url = await self._url(target, found)
        request.state.event = "click"
        self._keep(request, target, found, at)
        return Response(
            status_code=302, headers={"location": url, EXTERNAL_LOCATION: "1", **_HEADERS}
        )

    def _resolve(self, database: Database, target: ClickTarget) -> Resolved:
        """On the outbox thread: the row's list and delivery (per-reader), the send's links."""
        if target.row is None or target.row == PROBE_ROW:
            list_name = target.list_name
            if not list_name:
                return Resolved(list_name, None)
            send = self._send_links(database, target.issue, list_name)
            return Resolved(list_name, send.links, mode=send.mode)
        row = database.clicks.delivery(target.row)
        if row is None or row[0] != target.issue:
            return Resolved(None, None)  # a forgotten reader's row: nothing of theirs is kept
        _, list_name, sent_at = row
        send = self._send_links(database, target.issue, list_name)
        return Resolved(list_name, send.links, target.row, _epoch(sent_at), send.mode)

    def _send_links(self, database: Database, issue: int, list_name: str) -> SendLinks:
        key = (issue, list_name)
        cached = self._links.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < LINKS_TTL:
            self._links.move_to_end(key)
            return cached[1]
        tracked = database.sent_links.tracked(issue, list_name)
        if tracked is None:
            # Not kept: a send may record its links a moment later (check --online asks
            # before a send), and its clicks must not follow this answer for LINKS_TTL.
            return SendLinks(None, None)
        send = SendLinks(tracked.links, self._mode_of(tracked.mode, tracked.recorded_at))
        self._links[key] = (now, send)
        self._links.move_to_end(key)
        while len(self._links) > _LINK_CACHE:
            self._links.popitem(last=False)
        return send

    def _mode_of(self, mode: str, recorded_at: str) -> TrackingMode:
        """What is kept of a click on a send recorded in `mode` at `recorded_at`: its own mode
        when it was made after serve read [tracking] (the editor turned tracking on and sent
        without restarting serve: serve's reading is the stale one), else the lesser of the two
        (serve restarted since with tracking turned down: the editor's newer choice)."""
        ours = self.settings.tracking.clicks
        try:
            recorded = dt.datetime.fromisoformat(recorded_at).replace(tzinfo=dt.UTC)  # UTC text
        except ValueError:
            recorded = None
        kept = TrackingMode.stored(mode)
        if recorded is not None and recorded > self._read_at:
            return kept
        return TrackingMode.least(kept, ours)

    async def _url(self, target: ClickTarget, found: Resolved) -> str:
        """The link the issue has at the token's place (see the module docstring)."""
        web = issue_url(self.settings.newsletter.base_url, target.issue)
        if target.place.region is Region.CANARY:
            return web
        url = found.links.get(target.place) if found.links is not None else None
        if url is None:
            url = await run_in_threadpool(self._file_link, target)
        if url is None or target.names(url) is False:
            return web
        return url

    def _file_link(self, target: ClickTarget) -> str | None:
        """The issue file's link at the place: before the first send (check --online, the
        preview's sample), or for a send recorded nowhere."""
        with contextlib.suppress(NewsletterError):
            url = link_at(self.archive.issue(target.issue), target.place)
            if url is not None and url.startswith(("https://", "http://")):
                return url
        return None

    def _keep(self, request: Request, target: ClickTarget, found: Resolved, at: float) -> None:
        mode = found.mode or self.settings.tracking.clicks
        if mode == TrackingMode.OFF or found.list_name is None or target.row == PROBE_ROW:
            return  # not measured now, a forgotten reader, or no reader's (a check, a sample)
        per_reader = mode == TrackingMode.PER_READER and found.row is not None
        named = target._replace(row=found.row if per_reader else None)
        event = click_event(
            at=at,
            target=named,
            method=request.method,
            headers=request.headers,
            client=scope_client_ip(request.scope, self._trusted) or "",
            ip_mode=self.settings.privacy.ip,
            ip_key=self._ip_key,
            delivered_at=found.delivered_at if per_reader else None,
        )
        self.writer.add(StoredClick(target.issue, found.list_name, ClickRecord(*event)))


def _epoch(sent_at: str | None) -> float | None:
    if not sent_at:
        return None
    try:
        return dt.datetime.fromisoformat(sent_at).timestamp()
    except ValueError:
        return None
