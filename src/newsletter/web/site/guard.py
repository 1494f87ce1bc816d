"""The outermost HTTP layer of `newsletter serve`: any request in, a hardened answer out.

Guard wraps the whole ASGI app, so it also sees the answers Starlette's own error handling makes:
it answers only to the Host names it is given (400 otherwise: no Host header reflected into a
redirect or a page), refuses bodies over MAX_BODY (413) and bodies not all there BODY_TIMEOUT
seconds after the request's head (408: a deadline, not a pause between chunks), makes every
redirect relative (but a tracked link's: EXTERNAL_LOCATION), adds the security headers every
page needs, turns an unhandled exception into a plain 500 for the client and a traceback in the
server log, and writes the access log: one JSON object per request, its client the address
clientip.py reads through `[serve] trusted_proxies`, its path with every token (unsubscribe,
click, confirmation, preferences) redacted and without the query string. (Its head's deadline,
and the cap on connections, are deadlines.py's.)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from newsletter.links import WEBHOOK_PATH, prefix
from newsletter.web.site.clientip import IPNetwork, scope_client_ip
from newsletter.webhooks.common import MAX_BODY as WEBHOOK_BODY

# A one-click body is 26 bytes; multipart framing adds ~200. Anything near this is not one.
MAX_BODY = 4096
WEBHOOK_PREFIX = prefix(WEBHOOK_PATH)
# Seconds a request body may take to arrive, in all: a client that announces more than it sends,
# or sends it a byte at a time, would otherwise hold its connection open for ever.
BODY_TIMEOUT = 10.0

PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    b"content-security-policy": PAGE_CSP.encode(),
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"no-referrer",
    b"x-frame-options": b"DENY",
    b"cross-origin-opener-policy": b"same-origin",
    b"cross-origin-resource-policy": b"same-origin",
    b"permissions-policy": b"camera=(), microphone=(), geolocation=(), payment=()",
}

access_log = logging.getLogger("newsletter.access")
error_log = logging.getLogger("newsletter.serve")

_TOKEN_ROUTE = re.compile(r"^/(unsubscribe|resubscribe|r|confirm|move|preferences)/[^/]+")
# A route whose redirect leaves the site by design (a tracked link's, to the URL the issue has
# at that place) says so with this header; Guard takes it out and leaves the Location as it is.
EXTERNAL_LOCATION = "x-newsletter-external-location"
_EXTERNAL = EXTERNAL_LOCATION.encode()
# Anything shaped like a token (KID.BOX, or the first format's KID.PAYLOAD.MAC), wherever it
# appears in a path.
_TOKEN_SHAPE = re.compile(
    r"[A-Za-z0-9_-]{8}\.(?:[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{16,}|[A-Za-z0-9_-]{26,})"
)


def redact_path(path: str) -> str:
    """The path as it may be logged: tokens replaced by `[token]`."""
    return _TOKEN_SHAPE.sub("[token]", _TOKEN_ROUTE.sub(r"/\1/[token]", path))


class Guard:
    """The outermost layer: body size limit, security headers, no tracebacks, access log.

    It wraps the whole Starlette app, so it also sees the answers Starlette's own error handling
    produces. The access log is one JSON object per request; the path is logged with every token
    redacted and without its query string.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: Iterable[str],
        max_body: int = MAX_BODY,
        body_timeout: float = BODY_TIMEOUT,
        trusted: Sequence[IPNetwork] = (),
    ) -> None:
        self.app = app
        self.trusted = tuple(trusted)
        self.hosts = frozenset(h.lower() for h in hosts)
        self.max_body = max_body
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        deadline = started + self.body_timeout
        sent = {"status": 0, "bytes": 0}
        received = 0
        body_done = False
        # Providers' webhooks post batches of events (webhooks/common.py); everything else is
        # a form of a few fields.
        limit = WEBHOOK_BODY if scope["path"].startswith(WEBHOOK_PREFIX) else self.max_body

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:
                return await receive()  # only http.disconnect is left to wait for
            try:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                raise HTTPException(408, headers={"connection": "close"}) from None
            body_done = not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > limit:
                raise HTTPException(413)
            return message

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                given = message.get("headers", [])
                external = any(name.lower() == _EXTERNAL for name, _ in given)
                headers = [
                    (name, relative_location(scope["path"], value.decode("latin-1")).encode())
                    if name.lower() == b"location" and not external
                    else (name, value)
                    for name, value in given
                    if name.lower() != _EXTERNAL
                ]
                present = {name.lower() for name, _ in headers}
                extra = [(k, v) for k, v in SECURITY_HEADERS.items() if k not in present]
                message["headers"] = [*headers, *extra]
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))
                if not message.get("more_body", False):
                    # Logged before the last byte leaves: whoever got the answer finds the line.
                    log_once()
            await send(message)

        logged = False

        def log_once() -> None:
            nonlocal logged
            if not logged:
                logged = True
                _log_access(
                    scope,
                    scope_client_ip(scope, self.trusted),
                    sent["status"],
                    sent["bytes"],
                    time.perf_counter() - started,
                )

        try:
            length = _content_length(scope)
            if length is None or not self._host_allowed(scope):
                await _plain(guarded_send, 400)
            elif length > limit:
                await _plain(guarded_send, 413)
            else:
                await self.app(scope, limited_receive, guarded_send)
        except Exception:
            # Starlette has already answered 500 from its handler; here it is only logged,
            # with the redacted path, so uvicorn does not print it again.
            error_log.exception(
                "error while serving %s %s", scope["method"], redact_path(scope["path"])
            )
            if not sent["status"]:
                await _plain(guarded_send, 500)
        finally:
            log_once()

    def _host_allowed(self, scope: Scope) -> bool:
        host = _header(scope, b"host").lower()
        if not host:
            return True  # HTTP/1.0: URLs are then built from the socket, not from the client
        name = host[: host.find("]") + 1] if host.startswith("[") else host.rpartition(":")[0]
        return (name or host) in self.hosts


def relative_location(path: str, location: str) -> str:
    """`location` as a reference relative to the request's `path`: a redirect never names a
    host (the Host header is the client's word) and stays right below a proxy's path prefix."""
    target = urlsplit(location)
    here = path.split("/")[1:-1]  # the folders of the request: /a/b -> [a], /a/b/ -> [a, b]
    there = (target.path or "/").split("/")[1:]
    common = 0
    while common < min(len(here), len(there) - 1) and here[common] == there[common]:
        common += 1
    relative = "../" * (len(here) - common) + "/".join(there[common:])
    if ":" in relative.split("/")[0]:
        relative = f"./{relative}"  # a first segment with a colon would read as a scheme
    return (relative or "./") + (f"?{target.query}" if target.query else "")


def _content_length(scope: Scope) -> int | None:
    """The declared body size (0 if none); None when the header is not a number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return 0


async def _plain(send: Send, status: int) -> None:
    body = f"{status}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _log_access(scope: Scope, client: str | None, status: int, size: int, seconds: float) -> None:
    state = scope.get("state") or {}
    record = {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "client": client,
        "method": scope["method"],
        "path": redact_path(scope["path"]),
        "status": status,
        "bytes": size,
        "ms": round(seconds * 1000, 1),
        "user_agent": _header(scope, b"user-agent")[:200],
    }
    for key in ("event", "list"):
        if key in state:
            record[key] = state[key]
    access_log.info(json.dumps(record, ensure_ascii=False))


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""
