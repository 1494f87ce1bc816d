"""What both web apps share: a host and port in, a listening socket and its URL out; the
loopback rule; and the Jinja environment their pages are rendered with (autoescape on).
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from newsletter.errors import NewsletterError

# The Host header values a loopback-only server answers to (no DNS rebinding from a web page).
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"]
# Pages that depend on state (a token, a fresh render) must never be served from a cache.
NO_STORE = {"cache-control": "no-store"}


def is_loopback(sock: socket.socket) -> bool:
    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen on host:port (0: any free port); a busy port is a NewsletterError, not a traceback."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise NewsletterError(
            f"cannot listen on {host!r}: {exc.strerror}", hint="Pass --host 127.0.0.1."
        ) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise NewsletterError(
                f"port {port} on {host} is already in use",
                hint=f"Stop the other server or pass another port: --port {port + 1} "
                "(--port 0 picks a free one).",
            ) from None
        raise NewsletterError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            hint="Pass another --port or --host.",
        ) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, path: str = "/") -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
