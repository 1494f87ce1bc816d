"""`newsletter serve`'s app under real uvicorn on 127.0.0.1, port 0, in a thread, for tests.

The socket is bound first so the project's base_url can be the server's own URL: the links in
generated messages then point at this server, and a test replays them exactly as written.
"""

from __future__ import annotations

import base64
import email
import email.policy
import hmac
import json
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from newsletter.config.settings import Settings, load_settings
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory
from newsletter.mail.tokens import key_id, signing_key
from newsletter.models import Subscriber
from newsletter.rendering.render import render_issue
from newsletter.web.site.app import create_app
from newsletter.web.site.server import server_config

SECRET = "serve-tests-secret-0123456789abcdef"
ALICE = "alice@example.net"


class Records(logging.Handler):
    """Every record of the loggers it is attached to, formatted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class RunningService:
    url: str
    settings: Settings
    log: Records
    env: dict[str, str] = field(default_factory=dict)

    def wait_for_log(self, text: str, timeout: float = 5.0) -> bool:
        """True once a log line contains `text`: the server logs some things after answering."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.log.lines):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def access(self) -> list[dict[str, Any]]:
        """The access log's JSON records so far."""
        return [json.loads(line) for line in self.log.lines if line.startswith("{")]


@contextmanager
def running_service(
    project: Path,
    *,
    body_timeout: float | None = None,
    fetch: Callable[[str], bytes] | None = None,
    **env: str,
) -> Iterator[RunningService]:
    """Serve `project` until the block ends. `env` adds NEWSLETTER_* settings; `fetch` stands in
    for the network SES's webhook reaches (SNS certificates, confirmation URLs)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    environ = {"NEWSLETTER_SECRET": SECRET, "NEWSLETTER_NEWSLETTER__BASE_URL": url, **env}
    settings = load_settings(project / "newsletter.toml", environ=environ)
    key = signing_key(settings, allow_ephemeral=False)
    records = Records()
    loggers = [logging.getLogger(n) for n in ("newsletter", "uvicorn", "uvicorn.error")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(records)
        lg.setLevel(logging.DEBUG)
    config = server_config(
        create_app(
            settings,
            key.secret,
            previous=key.previous,
            body_timeout=body_timeout,
            **({"fetch": fetch} if fetch else {}),
        ),
        settings.serve,
        log_level="debug",
        log_config=None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield RunningService(url, settings, records, environ)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(records)
            lg.setLevel(level)


def message_for(settings: Settings, address: str, list_name: str = "main") -> EmailMessage:
    """The message `send` would deliver to `address`, parsed back from its bytes."""
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    factory = MessageFactory(rendered, settings, list_name, secret=SECRET.encode())
    data = factory.build(Subscriber(envelope=address, name="Alice Chen")).data
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def one_click_url(settings: Settings, address: str = ALICE, list_name: str = "main") -> str:
    """The https-or-http URL of List-Unsubscribe, exactly as a mailbox provider reads it."""
    message = message_for(settings, address, list_name)
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    urls = re.findall(r"<([^>]+)>", message["List-Unsubscribe"])
    assert urls[1].startswith("mailto:")
    return urls[0]


def first_format_token(secret: str, list_name: str, address: str) -> str:
    """A token in the first format (KID.PAYLOAD.MAC: the address in plain base64, HMAC-signed),
    as the links in issues sent before tokens were made opaque carry."""
    kid = key_id(secret)
    payload = base64.urlsafe_b64encode(f"{list_name}\n{address}".encode()).decode().rstrip("=")
    message = b"newsletter-unsubscribe-v1\n" + f"{kid}.{payload}".encode()
    mac = base64.urlsafe_b64encode(hmac.digest(secret.encode(), message, "sha256"))
    return f"{kid}.{payload}.{mac.decode().rstrip('=')}"


@contextmanager
def serve_process(
    project: Path, env: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`newsletter serve --port 0` as its own process in `project`: its base URL once /healthz
    answers, and the process (its stderr unread past the first line, for the test to read after
    the block). Stopped by SIGTERM at the end of the block."""
    process = subprocess.Popen(
        [sys.executable, "-m", "newsletter", "serve", "--port", "0"],
        cwd=project,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+)/", first)
        assert match, first
        base = match.group(1)
        deadline = time.monotonic() + 60  # a hang guard: a loaded machine starts it slowly
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=30).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not answer /healthz"
            time.sleep(0.05)
        yield base, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
