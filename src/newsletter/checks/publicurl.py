"""[newsletter] base_url in, what keeps it from being a public address out: every unsubscribe,
preference and archive link of a message starts with it, and a message once sent cannot be
changed, so a send to a real list with a loopback or http base_url publishes dead links for
good. `init`'s default (http://127.0.0.1:8025, the local `serve`) is the usual cause; a staging
list's test send is not refused for it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from newsletter.checks.lint import Finding

CODE = "base-url"


def base_url_fault(base_url: str) -> str:
    """Why readers cannot use links under `base_url` ('' when they can): a host that is this
    machine (loopback, 0.0.0.0, localhost) or a plain http:// address."""
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower().rstrip(".")
    if _this_machine(host):
        return (
            f"{host} is this machine (loopback): every reader's unsubscribe and archive link"
            " would point at their own computer"
        )
    if parts.scheme != "https":
        return (
            "it is not https: Gmail and Yahoo honour one-click unsubscribe only over https, and"
            " browsers warn on the archive's pages"
        )
    return ""


def _this_machine(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def base_url_findings(
    base_url: str, list_name: str, *, staging: bool, sending: bool
) -> list[Finding]:
    """The finding of a send to `list_name` with this base_url: an error (the send refuses it
    unless --force). Only when `sending`: `check` runs in CI on every pull request, where the
    production base_url is often not known (set on the server, or still init's local one), so
    it gets `base_url_note` instead, never a failed run. Nothing for a staging list: a test send
    to the editor is what a local base_url is for."""
    fault = base_url_fault(base_url)
    if staging or not fault or not sending:
        return []
    message = (
        f"[newsletter] base_url is {base_url}: {fault}, and a sent issue cannot be changed;"
        f" {_FIX}, or --force to send to {list_name!r} anyway"
    )
    return [Finding("error", CODE, message)]


def base_url_note(base_url: str, list_name: str, *, staging: bool) -> str:
    """What `check` says of the same base_url ('' when nothing): that the send will refuse."""
    fault = base_url_fault(base_url)
    if staging or not fault:
        return ""
    return (
        f"[newsletter] base_url is {base_url}: {fault}; `send --list {list_name}` refuses it"
        f" (--force overrides): {_FIX}"
    )


_FIX = (
    "set [newsletter] base_url (or NEWSLETTER_NEWSLETTER__BASE_URL) to the https:// address"
    " `newsletter serve` answers at behind its TLS proxy (docs/guide/production.md)"
)
