"""A link's or an image's address as the weekly wrote it -> the address an email can carry.

Relative ones resolve against the front matter's `base:` (the page the weekly's own site shows
the issue at), as a browser on that page would; without a base, a relative image is a file
under issues/ and a relative link cannot be followed (a Note; its words stay). A site's
internal link (Zola's `@/page.md`) names a source file, never a page: it is a Note either way.
A template expression as the address (Eleventy's `{{ '/img/x.png' | url }}`, Jekyll's
`relative_url` and `absolute_url`) is what the site's build makes of a literal path: that path,
then resolved like any other; any other expression is named in a Note, read by Jinja's parser
(Nunjucks' and Liquid's `{{ … }}` are its syntax), never by a pattern over the text.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal
from urllib.parse import urljoin, urlsplit

import jinja2
from jinja2 import nodes

Level = Literal["error", "warning"]
_LINK_SCHEMES = ("http", "https", "mailto")
_YOUTUBE = ("www.youtube.com", "youtube.com", "www.youtube-nocookie.com")
# The filters that make a site's address of a literal path: Eleventy's, and Jekyll's.
_PATH_FILTERS = frozenset({"url", "relative_url", "absolute_url"})


def templated(address: str) -> bool:
    """An address written as a template (`{{ … }}` or `{% … %}`), for the site's build to fill."""
    return "{{" in address or "{%" in address


@cache
def expanded(address: str) -> str | None:
    """A templated address as the path it stands for (`{{ '/x/' | url }}#a` -> `/x/#a`), or None
    when it is not a known filter on a literal path (a variable, a Liquid tag, other filters)."""
    try:
        # Parsed, never rendered: the tree says what the expression is.
        body = jinja2.Environment(autoescape=True).parse(address).body
    except jinja2.TemplateSyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return None
    out = []
    for node in body[0].nodes:
        if isinstance(node, nodes.TemplateData):
            out.append(node.data)
        elif (
            isinstance(node, nodes.Filter)
            and node.name in _PATH_FILTERS
            and not node.args
            and isinstance(node.node, nodes.Const)
            and isinstance(node.node.value, str)
        ):
            out.append(node.node.value)
        else:
            return None
    return "".join(out).strip()


def link_target(
    href: str, base: str, line: int, note: Callable[[Level, str, int, str], None]
) -> str | None:
    """`href` as an absolute address, or None after telling `note` why not."""
    if templated(href):
        path = expanded(href)
        if path is None:
            note(
                "warning",
                "link",
                line,
                f"the link's address {href!r} is a template tag that only the site's own build "
                "fills in: its text is shown without the link; write the address it stands for",
            )
            return None
        href = path
    if any(c.isspace() for c in href.strip()):
        note(
            "error",
            "link",
            line,
            f"the link to {href!r} holds a space, which ends an address: its text is shown "
            "without the link; write each space as %20",
        )
        return None
    href = href.strip()
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


def picture_source(
    written: str, tag: str, base: str, line: int, note: Callable[[Level, str, int, str], None]
) -> str | None:
    """An image's address as `tag` (`<img>`, `![…](…)`) wrote it -> the address an email shows
    (see image_source), or None after an error that names the tag and the address."""
    src = written.strip()
    why = ""
    if templated(src):
        path = expanded(src)
        if path is None:
            why = (
                "is a template tag that only the site's own build fills in: write the "
                "address it stands for"
            )
        else:
            src = path
    if not why and any(c.isspace() or ord(c) < 32 for c in src):
        why = "holds a space or a control character, which ends an address: write each space as %20"
    if not why:
        src = image_source(src, base)
        if src.startswith("/"):
            why = (
                "is at the root of the weekly's own site, which an email cannot know: add the "
                "issue page's address to the front matter (base: https://example.org/weekly/42/), "
                "or write the image's whole address"
            )
    if why:
        note("error", "link", line, f"the image {tag}'s address {written!r} {why}")
        return None
    return src
