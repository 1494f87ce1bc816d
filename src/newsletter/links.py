"""The public URL scheme: base_url and an issue number or token in, the URLs readers follow out.

The email (view in browser, unsubscribe, a tracked link), the List-Unsubscribe header, the web
archive and `newsletter serve`'s routes all agree on these paths; change them here or not at all.
"""

from __future__ import annotations

ISSUE_PATH = "/issues/{number}"
HOW_TO_UNSUBSCRIBE_PATH = "/unsubscribe"
UNSUBSCRIBE_PATH = "/unsubscribe/{token}"
RESUBSCRIBE_PATH = "/resubscribe/{token}"
FEED_PATH = "/feed.xml"
CLICK_PATH = "/r/{token}"
SIGNUP_PATH = "/signup"
CONFIRM_PATH = "/confirm/{token}"
MOVE_PATH = "/move/{token}"
PREFERENCES_PATH = "/preferences/{token}"


def issue_url(base_url: str, number: int) -> str:
    """An issue's public page: the email's "view in browser" link points here."""
    return base_url.rstrip("/") + ISSUE_PATH.format(number=number)


def feed_url(base_url: str) -> str:
    """The archive's Atom feed."""
    return base_url.rstrip("/") + FEED_PATH


def how_to_unsubscribe_url(base_url: str) -> str:
    """The page that tells a reader how to unsubscribe (the archive's stand-in for a token)."""
    return base_url.rstrip("/") + HOW_TO_UNSUBSCRIBE_PATH


def unsubscribe_url(base_url: str, token: str) -> str:
    """One reader's one-click (RFC 8058) and visible unsubscribe link."""
    return base_url.rstrip("/") + UNSUBSCRIBE_PATH.format(token=token)


def click_url(base_url: str, token: str) -> str:
    """A tracked link: `newsletter serve` counts the request and redirects to the issue's link."""
    return base_url.rstrip("/") + CLICK_PATH.format(token=token)


def signup_url(base_url: str) -> str:
    """The signup page (the archive's pages link it)."""
    return base_url.rstrip("/") + SIGNUP_PATH


def confirm_url(base_url: str, token: str) -> str:
    """A signup's confirmation link: its page confirms by POST, never on the GET."""
    return base_url.rstrip("/") + CONFIRM_PATH.format(token=token)


def move_url(base_url: str, token: str) -> str:
    """An address change's confirmation link, mailed to the new address."""
    return base_url.rstrip("/") + MOVE_PATH.format(token=token)


def preferences_url(base_url: str, token: str) -> str:
    """A reader's preference page, reached with their unsubscribe token."""
    return base_url.rstrip("/") + PREFERENCES_PATH.format(token=token)
