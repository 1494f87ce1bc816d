"""An email's HTML part (and its own image files) in; screenshots out: PNGs at 375 and 680 px,
light and dark, taken in headless Chromium with the network shut.

One Chromium start for every page asked for (a diff's two versions: 8 shots). Nothing the email
names is fetched: a remote image, a web font or a tracking pixel is refused where the browser
asks for it (shown blocked, as a client that blocks images shows it, and listed), and the
issue's own images under issues/ are answered from the revision's files, never from the site.
Host names resolve to nothing either, so a request the route missed still goes nowhere.
Scripts are off, as in every mail client. Playwright and a Chromium are optional (the
`shots` extra): `shots_missing` says what is not there and how to get it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from newsletter.distribution import extra_command
from newsletter.errors import NewsletterError

WIDTHS = (375, 680)  # a phone, and a desktop client's reading pane (the email is 600 px wide)
SCHEMES = ("light", "dark")
# A low screen: a full-page shot is then as tall as the email, never padded to a screen's
# height with background, so two versions' shots end where their emails end (pixels.py lines
# up their bottoms to find what moved).
_HEIGHT = 100
# The tallest shot taken: an email is some thousands of pixels tall (Gmail clips its HTML at
# ~102 KB), and a page a stranger's pull request makes 300,000 px tall would be a 680 x 300,000
# PNG, which Pillow refuses as a decompression bomb (and 800 MB of pixels if it did not). What
# lies below is not shot; the diff's page says where the shots end.
MAX_HEIGHT = 20_000
_STEP_TIMEOUT_MS = 180_000
# Found on PATH in this order when no executable is configured.
_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_ARGS = [
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    # Every host name resolves to nothing: the route below refuses requests, this refuses what
    # might reach the network around it (a prefetch, a DNS lookup).
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
SHOTS_HINT = (
    f"{extra_command('shots')} and a Chromium (apt-get install chromium), "
    "or name one: --chromium PATH or NEWSLETTER_CHROMIUM"
)


class ShotsError(NewsletterError):
    """Playwright, Pillow or a Chromium is missing: no pictures."""

    hint = SHOTS_HINT


@dataclass(frozen=True)
class EmailPage:
    """What a shot is taken of: the HTML part and the issue's own images by their URL."""

    html: str
    images: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Shot:
    width: int
    scheme: str
    png: bytes

    @property
    def name(self) -> str:
        return f"{self.width}-{self.scheme}"


@dataclass(frozen=True)
class PageShots:
    """One page's shots (WIDTHS x SCHEMES, in that order) and what it asked for and was refused."""

    shots: tuple[Shot, ...]
    blocked: tuple[str, ...]


def shots_missing(chromium: str | None = None) -> str | None:
    """Why shots cannot be taken here (a missing package or browser), or None. The packages
    are looked for, not imported: `diff` asks on every run, and importing Playwright's API
    costs it about 0.2 s."""
    for module, package in (("playwright.sync_api", "playwright"), ("PIL", "Pillow")):
        if not _installed(module):
            return f"the {package} package is not installed"
    if find_chromium(chromium) is None:
        wanted = chromium or os.environ.get("NEWSLETTER_CHROMIUM")
        return f"no Chromium at {wanted}" if wanted else "no Chromium found on PATH"
    return None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


def find_chromium(chromium: str | None = None) -> str | None:
    """The browser to run: the one named (argument, then NEWSLETTER_CHROMIUM), else the first
    of the usual names on PATH."""
    wanted = chromium or os.environ.get("NEWSLETTER_CHROMIUM")
    if wanted:
        return wanted if os.path.isfile(wanted) else shutil.which(wanted)
    return next(filter(None, map(shutil.which, _CHROMIUMS)), None)


def take_shots(pages: Sequence[EmailPage], chromium: str | None = None) -> list[PageShots]:
    """Every page at every width and scheme, in one Chromium. ShotsError without one."""
    missing = shots_missing(chromium)
    if missing is not None:
        raise ShotsError(f"no screenshots: {missing}")
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:  # there, but broken: a partial install
        raise ShotsError(f"no screenshots: playwright does not import: {exc}") from None

    executable = find_chromium(chromium)
    # Chromium refuses to run as root with its sandbox (a container, CI).
    args = [*_ARGS, "--no-sandbox"] if os.geteuid() == 0 else _ARGS
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=args)
            try:
                return [_shoot(browser, page) for page in pages]
            finally:
                browser.close()
    except Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ShotsError(f"Chromium ({executable}) failed: {first}") from None


def _shoot(browser: Any, email: EmailPage) -> PageShots:
    context = browser.new_context(
        viewport={"width": WIDTHS[0], "height": _HEIGHT},
        device_scale_factor=1,
        java_script_enabled=False,
        service_workers="block",
    )
    # Nothing waits on the network (it is shut): only a loaded machine makes a step slow, and
    # Playwright's 30 s default would fail a CI run sharing two cores with a test suite.
    context.set_default_timeout(_STEP_TIMEOUT_MS)
    blocked: list[str] = []

    def answer(route: Any) -> None:
        url = route.request.url
        body = email.images.get(url)
        if body is not None:
            route.fulfill(status=200, body=body)
        else:
            blocked.append(url)
            route.abort("blockedbyclient")

    context.route("**/*", answer)
    try:
        page = context.new_page()
        page.set_content(email.html, wait_until="load")
        shots = []
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": _HEIGHT})
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                # The clip is trimmed to the page: a shorter email is shot whole.
                clip = {"x": 0, "y": 0, "width": width, "height": MAX_HEIGHT}
                png = page.screenshot(full_page=True, clip=clip, type="png", animations="disabled")
                shots.append(Shot(width, scheme, png))
    finally:
        context.close()
    return PageShots(tuple(shots), tuple(dict.fromkeys(blocked)))
