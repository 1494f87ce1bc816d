"""The public URL scheme: base_url and an issue number or token in, the URLs readers follow out.

The email (view in browser, unsubscribe, a tracked link), the List-Unsubscribe header, the web
archive, `newsletter serve`'s routes and the checks that ask serve (check --online, doctor) all
take their paths from this table; change them here or not at all. A path is written as serve
routes it (Starlette's `{name}` or `{name:convertor}`); the URL builders fill it.
"""

from __future__ import annotations

import re

INDEX_PATH = "/"
ISSUE_PATH = "/issues/{number:int}"
ISSUE_FILE_PATH = "/issues/{path:path}"  # an issue's local image, next to its page
FEED_PATH = "/feed.xml"
HOW_TO_UNSUBSCRIBE_PATH = "/unsubscribe"
UNSUBSCRIBE_PATH = "/unsubscribe/{token}"
RESUBSCRIBE_PATH = "/resubscribe/{token}"
CLICK_PATH = "/r/{token}"
SIGNUP_PATH = "/signup"
SIGNUP_CHALLENGE_PATH = "/signup/challenge"
SIGNUP_EMBED_PATH = "/signup/embed"
SIGNUP_API_PATH = "/api/signup"
STATIC_PATH = "/static/{name}"
CONFIRM_PATH = "/confirm/{token}"
MOVE_PATH = "/move/{token}"
PREFERENCES_PATH = "/preferences/{token}"
WEBHOOK_PATH = "/webhooks/{provider}"
HEALTH_PATH = "/healthz"
ROBOTS_PATH = "/robots.txt"
_FIELD = re.compile(r"\{(\w+)(?::\w+)?\}")


def fill(path: str, **values: object) -> str:
    """A route's path with its fields filled: fill(ISSUE_PATH, number=14) is "/issues/14"."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]), path)


def prefix(path: str) -> str:
    """The fixed part of a route's path before its first field: "/webhooks/" of WEBHOOK_PATH."""
    return path.split("{", 1)[0]


def issue_url(base_url: str, number: int) -> str:
    """An issue's public page: the email's "view in browser" link points here."""
    return base_url.rstrip("/") + fill(ISSUE_PATH, number=number)


def feed_url(base_url: str) -> str:
    """The archive's Atom feed."""
    return base_url.rstrip("/") + FEED_PATH


def how_to_unsubscribe_url(base_url: str) -> str:
    """The page that tells a reader how to unsubscribe (the archive's stand-in for a token)."""
    return base_url.rstrip("/") + HOW_TO_UNSUBSCRIBE_PATH


def unsubscribe_url(base_url: str, token: str) -> str:
    """One reader's one-click (RFC 8058) and visible unsubscribe link."""
    return base_url.rstrip("/") + fill(UNSUBSCRIBE_PATH, token=token)


def click_url(base_url: str, token: str) -> str:
    """A tracked link: `newsletter serve` counts the request and redirects to the issue's link."""
    return base_url.rstrip("/") + fill(CLICK_PATH, token=token)


def signup_url(base_url: str) -> str:
    """The signup page (the archive's pages link it)."""
    return base_url.rstrip("/") + SIGNUP_PATH


def confirm_url(base_url: str, token: str) -> str:
    """A signup's confirmation link: its page confirms by POST, never on the GET."""
    return base_url.rstrip("/") + fill(CONFIRM_PATH, token=token)


def move_url(base_url: str, token: str) -> str:
    """An address change's confirmation link, mailed to the new address."""
    return base_url.rstrip("/") + fill(MOVE_PATH, token=token)


def preferences_url(base_url: str, token: str) -> str:
    """A reader's preference page, reached with their unsubscribe token."""
    return base_url.rstrip("/") + fill(PREFERENCES_PATH, token=token)
