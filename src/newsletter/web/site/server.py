"""The `newsletter serve` process: settings and a listening socket in; the app served by uvicorn
until SIGTERM or Ctrl-C out.

The app (app.py) is the routes; this is what runs them: uvicorn configured with `[serve]`'s
deadline per request and cap on connections (deadlines.py), the open-files limit raised to fit
that cap, the access log and errors on stderr, the outbox connection and the click writer
opened for the process and closed (flushed) when it ends.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from newsletter.config.settings import ServeSettings, Settings
from newsletter.mail.tokens import signing_key
from newsletter.web.site.app import create_app
from newsletter.web.site.clickwriter import ClickWriter
from newsletter.web.site.connection import DatabaseThread
from newsletter.web.site.deadlines import deadline_protocol, fit_descriptors
from newsletter.web.site.guard import error_log


def server_config(app: ASGIApp, serve: ServeSettings, **overrides: Any) -> uvicorn.Config:
    """uvicorn as `serve` runs it (tests pass log settings in `overrides`), with `serve`'s
    deadline per request and cap on connections (see deadlines.py). Not uvicorn's own
    `limit_concurrency`: it counts idle connections too, so slow clients would lock everyone
    out; the connection cap closes the idlest one instead."""
    options: dict[str, Any] = {
        "http": deadline_protocol(serve.timeout, serve.max_connections),
        # uvicorn's own access log prints the raw path, token included: Guard's replaces it.
        "access_log": False,
        # The client's address comes from X-Forwarded-For only through [serve] trusted_proxies
        # (clientip.py), read from the socket's peer: uvicorn's own reading stays off.
        "proxy_headers": False,
        "server_header": False,
        "log_level": "info",
        "lifespan": "off",
        "timeout_graceful_shutdown": 5,
        **overrides,
    }
    config = uvicorn.Config(app, **options)
    # uvicorn logs raw paths whenever "uvicorn.access" has a handler, whatever access_log says
    # (a custom logging setup, a test runner's capture): tokens must not come back that way.
    logging.getLogger("uvicorn.access").disabled = True
    return config


def serve(settings: Settings, sock: socket.socket) -> None:
    """Serve on the listening `sock` until SIGINT/SIGTERM; NEWSLETTER_SECRET must be set."""
    key = signing_key(settings, allow_ephemeral=False)
    database = DatabaseThread(
        settings.database_target, settings.outbox.durability, settings.outbox.lock_wait
    )
    database.open()
    # The access log (JSON lines) and our errors (with tracebacks) go to stderr: journald or
    # the container runtime adds the time and keeps them.
    ours = logging.getLogger("newsletter")
    if not ours.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ours.addHandler(handler)
        ours.setLevel(logging.INFO)
        ours.propagate = False
    clicks = ClickWriter(database)
    app = create_app(settings, key.secret, previous=key.previous, database=database, clicks=clicks)
    limits = settings.serve
    room = fit_descriptors(limits.max_connections)
    if room < limits.max_connections:
        error_log.warning(
            "[serve] max_connections is %d, but the limit on open files leaves room for %d:"
            " raise it (systemd: LimitNOFILE=) or lower max_connections",
            limits.max_connections,
            room,
        )
        limits = limits.model_copy(update={"max_connections": room})
    server = uvicorn.Server(server_config(app, limits))
    # uvicorn shuts down gracefully, then raises the signal again for the caller; a service
    # stopped by SIGTERM (systemd) or Ctrl-C has ended normally, so the second one is ignored.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        clicks.flush_from_thread()  # the events of the last moments, before the connection goes
        database.close()
