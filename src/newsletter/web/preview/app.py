"""Serving the preview: a Workspace in, a listening socket and a running uvicorn + Starlette out.

The socket is bound before the server starts, so a busy port is a clear error and `--port 0`
can print the real URL. Stopping (Ctrl-C or `stop()`) also ends the open event streams, which
would otherwise hold uvicorn's graceful shutdown until its timeout. Its connections are held to
`serve`'s deadlines (web/site/deadlines.py, `[serve] timeout` and `max_connections`): a half-sent
request head was kept open for ever, and whatever reaches the port (another user of the
machine, or a network with `--host`) could hold connections open that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import webbrowser
from collections.abc import AsyncIterator
from pathlib import Path
from types import FrameType

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from newsletter.config.settings import ServeSettings
from newsletter.web.listen import LOOPBACK_NAMES, is_loopback
from newsletter.web.preview.pages import UI_DIR, Pages
from newsletter.web.preview.sequencepages import SequencePages
from newsletter.web.preview.workspace import Hub, Workspace, watch
from newsletter.web.site.deadlines import deadline_protocol

_TEXT_BROWSERS = {"www-browser", "lynx", "links", "links2", "elinks", "w3m"}


class PreviewServer(uvicorn.Server):
    """uvicorn that also ends the open event streams when asked to stop (Ctrl-C or stop())."""

    def __init__(self, app: Starlette, hub: Hub, limits: ServeSettings | None = None) -> None:
        limits = limits or ServeSettings()
        config = uvicorn.Config(
            app,
            http=deadline_protocol(limits.timeout, limits.max_connections),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        super().__init__(config)
        self.hub = hub

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self.hub.close()

    def stop(self) -> None:
        self.should_exit = True
        self.hub.close()


def create_server(workspace: Workspace, *, trusted_hosts: list[str] | None = None) -> PreviewServer:
    hub = Hub()
    app = create_app(workspace, hub, trusted_hosts=trusted_hosts)
    # The settings as they are at start (a config with an error has none: the defaults then).
    return PreviewServer(app, hub, workspace.settings.serve if workspace.settings else None)


def create_app(
    workspace: Workspace, hub: Hub, *, trusted_hosts: list[str] | None = None
) -> Starlette:
    """The preview's routes; the file watcher runs for the app's lifetime."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        hub.bind(asyncio.get_running_loop())
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch(workspace, hub, stop))
        try:
            yield
        finally:
            stop.set()
            hub.close()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(watcher, 2)

    pages = Pages(workspace, hub)
    sequences = SequencePages(workspace, hub)
    middleware = []
    if trusted_hosts:
        # A page elsewhere on the web must not reach this server through DNS rebinding.
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=trusted_hosts))
    return Starlette(
        routes=[
            Route("/", pages.index),
            Route("/issues/{number:int}", pages.issue),
            Route("/issues/{number:int}/email.html", pages.email),
            Route("/issues/{number:int}/text.txt", pages.text),
            Route("/issues/{number:int}/source.html", pages.source),
            Route("/issues/{number:int}/message.eml", pages.eml),
            Route("/issues/{number:int}/report.html", pages.report),
            Route("/files/{path:path}", pages.image),
            Route("/sequences", sequences.index),
            Route("/sequences/{name:str}/{number:int}", sequences.step),
            Route("/sequences/{name:str}/{number:int}/email.html", sequences.email),
            Route("/mailbox", pages.mailbox),
            Route("/mailbox/{key:str}", pages.message),
            Route("/mailbox/{key:str}/email.html", pages.captured_email),
            Route("/mailbox/{key:str}/message.eml", pages.captured),
            Route("/events", pages.events),
            Mount("/static", StaticFiles(directory=UI_DIR.parent / "static"), name="static"),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )


def open_browser(url: str) -> bool:
    """Open `url` in a graphical browser; never a text browser that would take over the terminal."""
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    name = getattr(browser, "name", "")
    if Path(name).name in _TEXT_BROWSERS:
        return False
    return browser.open(url)


def serve_preview(
    workspace: Workspace, sock: socket.socket, *, open_url: str | None = None
) -> None:
    """Serve on the listening `sock` until Ctrl-C, then return; the URL works before this runs."""
    server = create_server(workspace, trusted_hosts=LOOPBACK_NAMES if is_loopback(sock) else None)
    if open_url is not None:
        # In a thread: starting a browser can take seconds, and the socket already queues requests.
        threading.Thread(target=open_browser, args=(open_url,), daemon=True).start()
    # uvicorn stops cleanly on Ctrl-C, then raises it again for the caller: here it is handled.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
