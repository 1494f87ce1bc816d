"""Re-take the screenshots in docs/: the Chinese weekly of tests/data/weeklies (issue 21: a cover,
images, essays, quotes) as the sample recipient gets it (680 and 375 px, light and dark), and the
preview showing it (desktop light, mobile dark). Its images are answered locally: nothing is
fetched. Run from the repo root:

    .venv/bin/python docs/screenshots.py

Needs Chromium (apt-get install chromium fonts-noto-cjk, or NEWSLETTER_CHROMIUM) and Playwright.
Works on a throwaway copy of the project, so nothing in the repo but docs/*.png changes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from newsletter.draft import review  # noqa: E402
from support.preview import running_preview  # noqa: E402
from support.project import copy_project  # noqa: E402
from support.weeklies import CHINESE, add_weekly, route_images, weekly_settings  # noqa: E402

FRAME_READY = "() => document.body.dataset.frameVersion === document.body.dataset.version"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_project(Path(tmp) / "project")
        os.chdir(root)
        path = add_weekly(root, CHINESE)
        settings = weekly_settings(root, CHINESE)
        draft = review(settings, path, "main")
        sizes = {
            image.src: (image.width, image.height)
            for image in draft.issue.images
            if image.width and image.height and not image.local
        }
        page_file = root / "email.html"
        page_file.write_text(draft.html, encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, width, height in (("desktop", 680, 1000), ("mobile", 375, 812)):
                for scheme in ("light", "dark"):
                    context = browser.new_context(
                        viewport={"width": width, "height": height},
                        color_scheme=scheme,
                        device_scale_factor=1,
                    )
                    route_images(context, settings, sizes)
                    page = context.new_page()
                    page.goto(page_file.as_uri())
                    page.wait_for_load_state("load")
                    page.screenshot(path=str(DOCS / f"email-{name}-{scheme}.png"))
                    context.close()
            # The preview reads newsletter.toml: give it the weekly's own settings.
            config = root / "newsletter.toml"
            text = config.read_text(encoding="utf-8")
            config.write_text(text.replace("[render]\n", '[render]\nnumbering = "none"\n'), "utf-8")
            with running_preview(root) as preview:
                context = browser.new_context(viewport={"width": 1200, "height": 860})
                # The frame's own images come from the preview; the rest are answered here.
                route_images(context, settings, sizes, allow=preview.url)
                page = context.new_page()
                page.goto(f"{preview.url}/issues/{CHINESE}")
                page.wait_for_function(FRAME_READY)
                page.wait_for_timeout(300)
                page.screenshot(path=str(DOCS / "preview.png"))
                page.click("[data-set='width:mobile']")
                page.click("[data-set='scheme:dark']")
                page.wait_for_function(FRAME_READY)
                page.wait_for_timeout(300)
                page.screenshot(path=str(DOCS / "preview-mobile-dark.png"))
                # Back to the defaults, which the preview keeps in localStorage.
                page.click("[data-set='width:desktop']")
                page.click("[data-set='scheme:light']")
                context.close()
            browser.close()
    for path in sorted(DOCS.glob("*.png")):
        print(f"{path.relative_to(REPO)}  {path.stat().st_size / 1024:.0f} KB")


if __name__ == "__main__":
    main()
