"""A link's or an image's address as the weekly wrote it -> the address an email can carry.

Relative ones resolve against the front matter's `base:` (the page the weekly's own site shows
the issue at), as a browser on that page would; without a base, a relative image is a file
under issues/ and a relative link cannot be followed (a Note; its words stay). A site's
internal link (Zola's `@/page.md`) names a source file, never a page: it is a Note either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal
from urllib.parse import urljoin, urlsplit

Level = Literal["error", "warning"]
_LINK_SCHEMES = ("http", "https", "mailto")
_YOUTUBE = ("www.youtube.com", "youtube.com", "www.youtube-nocookie.com")


def link_target(
    href: str, base: str, line: int, note: Callable[[Level, str, int, str], None]
) -> str | None:
    """`href` as an absolute address, or None after telling `note` why not."""
    scheme = urlsplit(href).scheme.lower()
    if any(ord(c) < 32 for c in href) or (scheme and scheme not in _LINK_SCHEMES):
        note(
            "error",
            "link",
            line,
            f"the link to {href!r} must be an absolute http://, https:// or mailto: address; "
            "its text is shown without the link",
        )
        return None
    if scheme:
        return href
    if href.startswith("@/"):
        note(
            "warning",
            "link",
            line,
            f"the internal link {href!r} names a page of the site's own source, which an "
            "email cannot follow: its text is shown without the link; link the page's "
            "https:// address",
        )
        return None
    if href.startswith("//"):
        return "https:" + href
    if base and href:
        return urljoin(base, href)
    note(
        "warning",
        "link",
        line,
        f"the link to {href!r} is relative, and an email has no page to resolve it from: its "
        "text is shown without the link; add the page's address to the front matter "
        "(base: https://example.org/weekly/42/) or write the link whole",
    )
    return None


def image_source(src: str, base: str) -> str:
    """An image's address: a relative one against `base`; without one, a file under issues/
    (`./img.png` is `img.png`)."""
    if src.startswith("//"):
        return "https:" + src
    if urlsplit(src).scheme or not src:
        return src
    if base:
        return urljoin(base, src)
    while src.startswith("./"):
        src = src[2:]
    return src


def player_page(url: str) -> str:
    """A YouTube player's address as the video's own page: watched there, not in a bare player."""
    page = urlsplit(url)
    if page.hostname in _YOUTUBE and page.path.startswith("/embed/"):
        return f"https://www.youtube.com/watch?v={page.path.removeprefix('/embed/')}"
    return url
