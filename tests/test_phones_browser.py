"""Every issue fits a phone, whatever loads (issue 30, point 6), measured in headless Chromium.

At 375 px, light and dark, with every image blocked (as Outlook, corporate clients, a host that
refuses hotlinking and the offline reader show them) and with every image loaded: the page does
not scroll sideways, and no element reaches past the screen's right edge, so nothing is cut off
by a container that clips it either. A code block is the one thing wider than the screen: it
scrolls sideways inside itself, so its own box fits and what is inside it may not. The issues:
14, the two weeklies of tests/data/weeklies, and tests/data/phones (an image-heavy digest,
tables, code with long lines, and site generators' callouts, whose text must also read on
their box in both schemes). Without Chromium the tests skip, except in CI (CI=true).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from newsletter.config.settings import Settings, load_settings
from newsletter.draft import review
from support.images import picture
from support.project import copy_project
from support.weeklies import CHINESE, ENGLISH, add_weekly, weekly_settings

pytestmark = pytest.mark.browser

PHONES = Path(__file__).resolve().parent / "data" / "phones"
PHONE = 375
# An image the issue gives no size loads at a photo's: wider than any screen.
UNSIZED = (1600, 900)
# Every element whose right edge is past the viewport, but for those inside a scroll container
# (a code block), which the reader scrolls sideways: the container itself must fit.
OVERFLOWING = """() => {
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (!box.width || box.right <= innerWidth + 0.5) continue;
    let inside = false;
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (scrolls(up)) { inside = true; break; }
    }
    const text = (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 40);
    const name = `${el.tagName.toLowerCase()}.${el.className}`;
    if (!inside) out.push(`${name} reaches ${Math.round(box.right)} px: ${text}`);
  }
  return out;
}"""
Issues = dict[str, tuple[Path, Settings]]


@pytest.fixture(scope="module")
def phone_issues(tmp_path_factory: pytest.TempPathFactory) -> Issues:
    """Each issue's HTML part (the sample recipient's, decoded) in a file, with its settings."""
    root = copy_project(tmp_path_factory.mktemp("phones") / "project")
    settings = load_settings(root / "newsletter.toml", environ={})
    paths = {"14": (root / "issues" / "14.yaml", settings)}
    for number in (CHINESE, ENGLISH):
        paths[str(number)] = (add_weekly(root, number), weekly_settings(root, number))
    for source in sorted(PHONES.glob("[0-9]*.md")):  # not README.md
        shutil.copy2(source, root / "issues" / source.name)
        paths[source.stem] = (root / "issues" / source.name, settings)
    files = {}
    for name, (path, issue_settings) in paths.items():
        page = root / f"email-{name}.html"
        page.write_text(review(issue_settings, path, "main").html, encoding="utf-8")
        files[name] = (page, issue_settings)
    return files


def serve_images(context: Any, settings: Settings, loaded: bool) -> None:
    """Every request refused (images blocked), or every image answered: a file under issues/
    from the folder, a remote one with a picture of the size the issue gives it."""
    base = f"{settings.newsletter.base_url.rstrip('/')}/issues/"

    def answer(route: Any) -> None:
        url = route.request.url
        local = settings.issues_dir / url[len(base) :] if url.startswith(base) else None
        if not loaded:
            route.abort()
        elif local is not None and local.is_file():
            route.fulfill(body=local.read_bytes(), content_type="image/png")
        else:
            body = picture(*UNSIZED, seed=sum(url.encode()))
            route.fulfill(body=body, content_type="image/png")

    context.route("http*://**/*", answer)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("images", ["blocked", "loaded"])
@pytest.mark.parametrize("name", ["14", str(CHINESE), str(ENGLISH), "31", "32", "33", "34"])
def test_no_element_reaches_past_a_phones_edge(
    browser: Any, phone_issues: Issues, name: str, images: str, scheme: str
) -> None:
    page_file, settings = phone_issues[name]
    context = browser.new_context(viewport={"width": PHONE, "height": 900}, color_scheme=scheme)
    serve_images(context, settings, loaded=images == "loaded")
    page = context.new_page()
    try:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        shown = page.evaluate(
            "[...document.images].map((img) => img.complete && img.naturalWidth > 0)"
        )
        assert shown == [images == "loaded"] * len(shown)
        assert page.evaluate(OVERFLOWING) == []
        scroll = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert scroll[0] <= scroll[1], "the email scrolls sideways"
    finally:
        context.close()


def test_a_code_block_scrolls_inside_itself_with_its_indentation(
    browser: Any, phone_issues: Issues
) -> None:
    """Long lines are not wrapped back to the left margin (where indentation would lie): the
    block keeps every line whole and scrolls sideways, inside the screen."""
    page_file, _ = phone_issues["33"]
    context = browser.new_context(viewport={"width": PHONE, "height": 900})
    page = context.new_page()
    try:
        page.goto(page_file.as_uri())
        block = page.evaluate(
            """(() => { const pre = document.querySelector('pre');
                 const style = getComputedStyle(pre), box = pre.getBoundingClientRect();
                 return [style.whiteSpace, style.overflowX, box.right <= innerWidth,
                         pre.scrollWidth > pre.clientWidth,
                         pre.textContent.includes('\\n          image: "{{ .Values')]; })()"""
        )
        assert block == ["pre", "auto", True, True, True]
    finally:
        context.close()


CONTRAST_JS = (Path(__file__).parent / "support" / "contrast.js").read_text(encoding="utf-8")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_callout_fits_a_phone_and_reads_in_both_schemes(
    browser: Any, phone_issues: Issues, scheme: str
) -> None:
    """issue 42: a site's callout (`::: warning`, `:::tip[…]`, `!!! danger`, `???+ note`) is a
    box inside the screen, its kind's colour on its left edge, its title and body readable on
    its own background, light and dark, with every image blocked."""
    page_file, settings = phone_issues["34"]
    context = browser.new_context(viewport={"width": PHONE, "height": 900}, color_scheme=scheme)
    serve_images(context, settings, loaded=False)
    page = context.new_page()
    try:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        boxes = page.evaluate(
            """[...document.querySelectorAll('table.nl-callout > tbody > tr > td')].map((td) => {
                 const box = td.getBoundingClientRect(), style = getComputedStyle(td);
                 return [Math.round(box.left), box.right <= innerWidth,
                         style.borderLeftWidth, style.borderLeftColor !== style.backgroundColor,
                         td.querySelector('.nl-callout-title').textContent.trim()]; })"""
        )
        titles = [box[4] for box in boxes]
        assert titles[0].startswith("📜 An excerpt"), titles
        assert titles[1:] == ["Try it", "Before you upgrade", "注意"], titles
        assert all(
            left >= 0 and fits and width == "4px" and shown for left, fits, width, shown, _ in boxes
        ), boxes
        results = page.evaluate(CONTRAST_JS)
        inside = page.evaluate(
            "[...document.querySelectorAll('.nl-callout')].map((t) => t.textContent).join(' ')"
        )
        boxed = [r for r in results if r["text"] in inside]
        assert len(boxed) >= 8, "the contrast walk found too few of the callouts' texts"
        assert [r for r in boxed if r["ratio"] < r["needed"]] == []
        assert page.evaluate(OVERFLOWING) == []
    finally:
        context.close()
