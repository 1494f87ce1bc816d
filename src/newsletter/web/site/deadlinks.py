"""An issue page's HTML and the links its file marks dead in; the page with each struck out.

The editor writes `dead:` in the issue file (models.DeadLink) once a link of a sent issue stops
answering (`check --archive` finds them). The archive page, not the email, shows it: each `<a>`
whose href is a dead URL is struck through and followed by a note, "link dead", or "link dead;
now at" and the replacement as a link. The rendered email is never touched, so what was sent
and what a send would send stay as they were. The page is read with html.parser: the dead
links' tags are found by their positions and only those characters are rewritten.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from html.parser import HTMLParser

# !important: the email's inlined styles set each link's text-decoration on the tag itself.
_STYLE = (
    "<style>a[data-dead]{text-decoration:line-through!important}"
    ".dead-link{font-size:90%;opacity:.85}</style>"
)


def mark_dead_links(page: str, dead: Mapping[str, str | None], words: Mapping[str, str]) -> str:
    """`page` with every link to a key of `dead` struck, noted in `words` ("dead_link",
    "dead_link_moved"), and the replacement linked after it."""
    if not dead:
        return page
    finder = _DeadAnchors(dead)
    finder.feed(page)
    finder.close()
    out, at = [], 0
    for start, end, close, url in finder.found:
        tag = page[start:end]
        out.append(page[at:start])
        if finder.head_end is not None and at <= finder.head_end < start:
            cut = finder.head_end - at
            out[-1] = out[-1][:cut] + _STYLE + out[-1][cut:]
        out.append(_struck(tag))
        out.append(page[end:close])
        replacement = dead[url]
        if replacement is None:
            note = f' <span class="dead-link">({html.escape(words["dead_link"])})</span>'
        else:
            note = (
                f' <span class="dead-link">({html.escape(words["dead_link_moved"])} '
                f'<a href="{html.escape(replacement)}">{html.escape(replacement)}</a>)</span>'
            )
        at = page.index(">", close) + 1  # past the </a>
        out.append(page[close:at] + note)
    out.append(page[at:])
    return "".join(out)


def _struck(tag: str) -> str:
    """The `<a …>` start tag with `data-dead` added before its `>`: the page's style strikes it."""
    return f'{tag[:-1].rstrip("/")} data-dead="1">'


class _DeadAnchors(HTMLParser):
    """Where each `<a href=DEAD>` starts and ends, and where its `</a>` starts, in offsets."""

    def __init__(self, dead: Mapping[str, str | None]) -> None:
        super().__init__(convert_charrefs=True)
        self.dead = dead
        self.found: list[tuple[int, int, int, str]] = []
        self._open: tuple[int, int, str] | None = None
        self.head_end: int | None = None  # where `</head>` starts: the style goes there
        self._line_starts = [0]

    def feed(self, data: str) -> None:
        at = data.find("\n")
        while at >= 0:
            self._line_starts.append(at + 1)
            at = data.find("\n", at + 1)
        super().feed(data)

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        href = dict(attrs).get("href")
        if href in self.dead:
            start = self._offset()
            text = self.get_starttag_text() or ""
            self._open = (start, start + len(text), href or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "head" and self.head_end is None:
            self.head_end = self._offset()
        if tag == "a" and self._open is not None:
            start, end, url = self._open
            self.found.append((start, end, self._offset(), url))
            self._open = None
