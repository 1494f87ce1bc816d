"""An IssueDiff (or one Version) in; the screenshots out: the diff as one self-contained HTML
page, or one version's shots as PNG files.

The page holds everything it shows: each screenshot is a data: URI, the styles are inline, and
its Content-Security-Policy forbids every load and every script, so it can be opened from a CI
artifact or a mail with nothing fetched. Before and after stand side by side at each width and
scheme, the regions the pixel diff found marked on both; the summary (subject, preheader, size,
findings, links) and the text part's diff beside them, the lines `diff` prints. Jinja's
autoescape writes every text: an issue's words, a revision's name, a blocked URL.
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass
from pathlib import Path

import jinja2

from newsletter.rendering.templatecache import page_environment
from newsletter.review.compare import IssueDiff, Version
from newsletter.review.pixels import Regions, changed_regions, decode, mark
from newsletter.review.shots import MAX_HEIGHT, EmailPage, PageShots, take_shots
from newsletter.review.summary import summary_lines, text_diff_lines

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class ShotPair:
    """One width and scheme, before and after, with the changed regions marked on both."""

    width: int
    scheme: str
    before: bytes
    after: bytes
    regions: Regions
    cut: bool = False  # a version is taller than MAX_HEIGHT: what lies below is not shown

    @property
    def name(self) -> str:
        return f"{self.width}-{self.scheme}"

    @property
    def before_uri(self) -> str:
        return _data_uri(self.before)

    @property
    def after_uri(self) -> str:
        return _data_uri(self.after)


def diff_page(found: IssueDiff, chromium: str | None = None) -> str:
    """The page for `found`: both versions shot in one Chromium (8 shots), then compared.
    ShotsError without Playwright, Pillow or a Chromium."""
    before, after = take_shots([_email(found.before), _email(found.after)], chromium)
    return render_page(found, pair_shots(before, after), before.blocked + after.blocked)


def pair_shots(before: PageShots, after: PageShots) -> list[ShotPair]:
    pairs = []
    for old, new in zip(before.shots, after.shots, strict=True):
        a, b = decode(old.png), decode(new.png)
        regions = changed_regions(a, b)
        # Nothing to draw: Chromium's own files, not encoded again.
        shown = (mark(a, regions.before), mark(b, regions.after)) if regions else (old.png, new.png)
        cut = max(a.height, b.height) >= MAX_HEIGHT
        pairs.append(ShotPair(old.width, old.scheme, *shown, regions, cut))
    return pairs


def render_page(found: IssueDiff, pairs: list[ShotPair], blocked: tuple[str, ...] = ()) -> str:
    return (
        _environment()
        .get_template("diff.html")
        .render(
            number=found.number,
            before_label=found.before.label,
            after_label=found.after.label,
            pairs=pairs,
            max_height=MAX_HEIGHT,
            blocked=list(dict.fromkeys(blocked)),
            summary=summary_lines(found),
            text_diff=text_diff_lines(found),
        )
    )


def write_shots(
    version: Version, out: Path, prefix: str = "", chromium: str | None = None
) -> list[Path]:
    """`version`'s shots as PREFIXWIDTH-SCHEME.png files in `out` (made if missing); the
    paths written. ShotsError without Playwright, Pillow or a Chromium."""
    (taken,) = take_shots([_email(version)], chromium)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in taken.shots:
        path = out / f"{prefix}{shot.name}.png"
        path.write_bytes(shot.png)
        written.append(path)
    return written


def _email(version: Version) -> EmailPage:
    return EmailPage(version.html, version.images)


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


@functools.cache
def _environment() -> jinja2.Environment:
    return page_environment(TEMPLATES)
