"""The two weeklies of tests/data/weeklies, written for these tests in the shapes of real ones:
issue 21, a long Chinese weekly (a cover, 39 images, two essays of 14 and 18 paragraphs, block
quotes, a quotes section of untitled items) and issue 580, a 150-item English community weekly
(30 sections, events as nested lists, `code` in titles, reference links, a quote of the week).

`add_weekly` copies one into a project's issues/; `weekly_settings` are that newsletter's
settings; `route_images` answers a browser's image requests from the project, so nothing leaves
the machine.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from newsletter.config.settings import Settings, load_settings
from support.images import picture

WEEKLIES = Path(__file__).resolve().parents[1] / "data" / "weeklies"
CHINESE, ENGLISH = 21, 580
_FOLDER = {CHINESE: "zh", ENGLISH: "en"}
# Each weekly numbers its own items (or none), as the two real ones do.
_ENV = {
    CHINESE: {"NEWSLETTER_RENDER__NUMBERING": "none"},
    ENGLISH: {
        "NEWSLETTER_NEWSLETTER__LANGUAGE": "en",
        "NEWSLETTER_NEWSLETTER__NAME": "The Crab Post",
        "NEWSLETTER_NEWSLETTER__SAMPLE_NAME": "Sam Reader",
        "NEWSLETTER_RENDER__NUMBERING": "none",
    },
}


def add_weekly(project: Path, number: int) -> Path:
    """Copy weekly `number` and its images into `project`/issues; the issue file's path."""
    shutil.copytree(WEEKLIES / _FOLDER[number], project / "issues", dirs_exist_ok=True)
    return project / "issues" / f"{number}.md"


# Four more, pasted as editors paste them (tests/data/weeklies/pasted/README.md); the local
# images 304 shows under issues/ are made here, each a picture of its own size.
PASTED = (301, 302, 303, 304)
_PASTED_IMAGES = {"images/304-downloads.png": (1200, 600), "images/304-office.png": (800, 600)}


def add_pasted(project: Path, number: int) -> Path:
    """Copy pasted weekly `number` into `project`/issues (with its images); its path."""
    path = project / "issues" / f"{number}.md"
    shutil.copy2(WEEKLIES / "pasted" / f"{number}.md", path)
    for name, size in _PASTED_IMAGES.items():
        image = project / "issues" / name
        image.parent.mkdir(parents=True, exist_ok=True)
        image.write_bytes(picture(*size, seed=len(name)))
    return path


def weekly_environ(number: int) -> dict[str, str]:
    return dict(_ENV[number])


def weekly_settings(project: Path, number: int) -> Settings:
    return load_settings(project / "newsletter.toml", environ=weekly_environ(number))


def route_images(
    context: Any, settings: Settings, sizes: dict[str, tuple[int, int]], allow: str = ""
) -> None:
    """Answer the email's image requests in a Playwright context: images under issues/ from
    the folder (at their base_url address), other images with a stand-in of the size the
    issue gives them (`sizes`, by URL); requests to `allow` (a server on loopback) go through;
    anything else is refused."""
    base = f"{settings.newsletter.base_url.rstrip('/')}/issues/"

    def answer(route: Any) -> None:
        url = route.request.url
        local = settings.issues_dir / url[len(base) :] if url.startswith(base) else None
        if allow and url.startswith(allow):
            route.continue_()
        elif local is not None and local.is_file():
            route.fulfill(body=local.read_bytes(), content_type="image/png")
        elif url in sizes:
            body = picture(*sizes[url], seed=sum(url.encode()))
            route.fulfill(body=body, content_type="image/png")
        else:
            route.abort()

    context.route("http*://**/*", answer)
