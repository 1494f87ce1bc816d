"""Screenshots in headless Chromium (issue 33, points 1 and 3): `diff --html` writes one page
that holds its 8 screenshots as data: URIs and loads nothing, the changed word marked where the
word is at each width and scheme and nothing marked between identical versions; the email's
remote requests are refused (a real server on loopback sees none) while its own images show
from the revision's files; `shots` writes 4 PNG files of the right widths, one line each."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image
from playwright.sync_api import sync_playwright

from newsletter.cli.main import cli
from newsletter.review import compare
from newsletter.review.pictures import pair_shots
from newsletter.review.pixels import Box
from newsletter.review.shots import MAX_HEIGHT, SCHEMES, WIDTHS, EmailPage, take_shots
from support.gitrepo import git
from support.images import png
from support.websites import website

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OLD_WORDS = "Welcome to the first issue"
# Not a greeting ("Greetings from ..." would be one, and the greeting line above it would go).
NEW_WORDS = "Welcome to this very first issue"
# The box of the first text node's words that start with `words`, in page pixels.
WORDS_BOX = """(words) => {
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    const at = node.textContent.indexOf(words);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + words.length);
    const box = range.getBoundingClientRect();
    return [box.left + scrollX, box.top + scrollY, box.right + scrollX, box.bottom + scrollY];
  }
  return null;
}"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def words_boxes(html: str, words: str, chromium: str) -> dict[tuple[int, str], Box]:
    """Where `words` stand in `html` at each width and scheme, measured in a browser of the
    test's own (after the shots' has closed: one sync Playwright at a time per thread)."""
    found = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for width in WIDTHS:
            for scheme in SCHEMES:
                page = browser.new_page(
                    viewport={"width": width, "height": 900}, color_scheme=scheme
                )
                page.set_default_timeout(180_000)  # a loaded machine, not a hang
                page.route("**/*", lambda route: route.abort())
                page.set_content(html)
                box = page.evaluate(WORDS_BOX, words)
                assert box is not None, f"{words!r} is not in the page"
                found[width, scheme] = Box(*(round(v) for v in box))
                page.close()
        browser.close()
    return found


def overlap(a: Box, b: Box) -> bool:
    return a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom


def test_a_changed_word_is_marked_where_it_stands_and_nothing_else(
    repo: Path, chromium: str
) -> None:
    edit(repo / "issues" / "1.md", OLD_WORDS, NEW_WORDS)  # the working tree
    found = compare(repo, 1)
    before, after = take_shots(
        [EmailPage(found.before.html), EmailPage(found.after.html)], chromium
    )
    pairs = pair_shots(before, after)
    assert [(p.width, p.scheme) for p in pairs] == [(w, s) for w in WIDTHS for s in SCHEMES]
    words = words_boxes(found.after.html, NEW_WORDS, chromium)
    for pair in pairs:
        assert pair.regions, f"{pair.name}: the change is not marked"
        # The words fit as the old ones did: the page kept its height, one set of boxes.
        assert pair.regions.before == pair.regions.after
        boxes = pair.regions.after
        assert any(overlap(r, words[pair.width, pair.scheme]) for r in boxes), (
            pair.name,
            boxes,
            words[pair.width, pair.scheme],
        )
        # One line's words changed (they fit as they did): the rest of the page is unmarked.
        height = Image.open(io.BytesIO(pair.after)).height
        assert sum(r.bottom - r.top for r in boxes) < height / 10, boxes
    # Identical versions: nothing is marked at any width or scheme.
    same = take_shots([EmailPage(found.after.html)] * 2, chromium)
    assert not any(p.regions for p in pair_shots(*same))
    assert [p.regions.marked for p in pair_shots(*same)] == [0] * len(pairs)


def test_a_paragraph_added_is_marked_and_what_moved_below_it_is_not(
    repo: Path, chromium: str
) -> None:
    added = "A paragraph added between two others, long enough to wrap on a phone."
    edit(repo / "issues" / "1.md", "## Worth reading", f"{added}\n\n## Worth reading")
    found = compare(repo, 1)
    before, after = take_shots(
        [EmailPage(found.before.html), EmailPage(found.after.html)], chromium
    )
    new = words_boxes(found.after.html, "A paragraph added", chromium)
    moved = words_boxes(found.after.html, "A tool worth a look", chromium)
    for pair in pair_shots(before, after):
        where = (pair.width, pair.scheme)
        assert any(overlap(r, new[where]) for r in pair.regions.after), (where, pair.regions)
        assert not any(overlap(r, moved[where]) for r in pair.regions.after), (where, pair.regions)
        assert pair.regions.before == (), where  # nothing was lost


class Loads(HTMLParser):
    """Every address the page would load or link, every tag, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.sources += [v or "" for k, v in attrs if k in ("src", "href", "srcset")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_diff_html_writes_one_page_that_loads_nothing(repo: Path, chromium: str) -> None:
    issue = repo / "issues" / "1.md"
    (repo / "issues" / "chart.png").write_bytes(png(300, 120, (20, 160, 60)))
    edit(
        issue,
        "## Tools",
        "![A chart](chart.png)\n\n![Far](https://images.example.org/far.png)\n\n## Tools",
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pictures")
    edit(issue, OLD_WORDS, NEW_WORDS)
    edit(issue, "(https://example.org/another)", "(https://example.org/elsewhere)")
    # The subject is the title: written into the page, it is text, never markup.
    edit(issue, 'title: "My Newsletter 1"', 'title: "My <b>Newsletter</b> & 1"')
    git(repo, "commit", "-q", "-am", "one word, one link")
    page_file = repo / "diff.html"
    config = str(repo / "newsletter.toml")
    # The configured Chromium, through a script that notes each start: one for the 8 shots.
    starts = repo.parent / "starts.log"
    wrapper = repo.parent / "chromium-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho start >> "{starts}"\nexec "{chromium}" "$@"\n', "utf-8")
    wrapper.chmod(0o755)
    result = CliRunner().invoke(
        cli,
        [
            "--config",
            config,
            "diff",
            "--issue",
            "1",
            "HEAD~1",
            "HEAD",
            "--html",
            str(page_file),
            "--chromium",
            str(wrapper),
        ],
    )
    assert result.exit_code == 0, result.output
    assert starts.read_text(encoding="utf-8") == "start\n"
    assert result.stdout.splitlines()[-1] == f"wrote {page_file}"
    html = page_file.read_text(encoding="utf-8")
    loads = Loads()
    loads.feed(html)
    assert len(loads.sources) == 8, loads.sources
    assert all(s.startswith("data:image/png;base64,") for s in loads.sources)
    assert "script" not in loads.tags
    assert "b" not in loads.tags
    text = "".join(loads.text)
    assert "My <b>Newsletter</b> & 1" in text
    assert f"+{NEW_WORDS}" in text
    assert f"-{OLD_WORDS}" in text
    assert "~ [Another link] https://example.org/another -> https://example.org/elsewhere" in text
    assert len(re.findall(r"\d+ changed regions? marked", text)) == 4, text
    # The remote image was asked for and refused; the issue's own, from git, was not.
    blocked = text.split("Blocked", 1)[1].split("Summary", 1)[0]
    assert "https://images.example.org/far.png" in blocked
    assert "chart.png" not in blocked


def test_nothing_the_email_names_is_fetched_but_its_own_images_show(
    tmp_path: Path, chromium: str
) -> None:
    own = "https://news.example.org/issues/chart.png"
    # A file of this machine's, named by a file: URL: never shown (a CI artifact would leak it).
    local = tmp_path / "secret.png"
    local.write_bytes(png(120, 60, (200, 30, 200)))
    with website() as site:
        html = (
            f'<html><head><link rel="stylesheet" href="{site.url("/ok")}">'
            f'<style>@import url("{site.url("/missing")}");</style></head>'
            f'<body style="background: url({site.url("/found")})"><p>Hello</p>'
            f'<img src="{site.url("/ok?img")}" alt="remote" width="50" height="50">'
            f'<img src="{local.as_uri()}" alt="local" width="120" height="60">'
            f'<img src="{own}" alt="ours" width="120" height="60"></body></html>'
        )
        (shots,) = take_shots([EmailPage(html, {own: png(120, 60, (20, 160, 60))})], chromium)
        assert sum(site.requests.values()) == 0, site.requests
    assert site.url("/ok?img") in shots.blocked
    assert site.url("/ok") in shots.blocked
    assert own not in shots.blocked
    for shot in shots.shots:
        image = Image.open(io.BytesIO(shot.png)).convert("RGB")
        colours = {rgb: n for n, rgb in image.getcolors(1 << 20) or []}
        assert colours.get((20, 160, 60), 0) >= 120 * 60, f"{shot.name}: our image is not shown"
        assert (200, 30, 200) not in colours, f"{shot.name}: a file: image was shown"


def test_shots_writes_four_pngs_one_line_each(tmp_path: Path, chromium: str) -> None:
    root = tmp_path / "news"  # not a git repository: the files as they are
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    out = tmp_path / "pictures"
    result = CliRunner().invoke(
        cli,
        ["--config", str(root / "newsletter.toml"), "shots", "--issue", "1", "--out", str(out)],
        env={"NEWSLETTER_CHROMIUM": chromium},
    )
    assert result.exit_code == 0, result.output
    names = [f"issue-1-{w}-{s}.png" for w in WIDTHS for s in SCHEMES]
    assert result.stdout.splitlines() == [str(out / name) for name in names]
    images: dict[str, Any] = {n: Image.open(out / n).convert("RGB") for n in names}
    for name, image in images.items():
        assert image.width == int(name.split("-")[2]), name
    # The whole email, not the first screen (900 px): on a phone it is longer than that.
    assert images["issue-1-375-light.png"].height > 900
    # Dark is dark: the page's background differs from light's, at each width.
    for width in WIDTHS:
        light = images[f"issue-1-{width}-light.png"].getpixel((2, 2))
        dark = images[f"issue-1-{width}-dark.png"].getpixel((2, 2))
        assert sum(dark) < sum(light), (width, light, dark)


def test_an_email_taller_than_any_email_is_shot_to_a_bound(chromium: str) -> None:
    # 300,000 px: a 680 x 300,000 PNG is refused by Pillow as a decompression bomb (the diff
    # page failed with a traceback), and would be 800 MB of pixels if it were not.
    tall = (
        '<html><body style="margin:0"><div style="height:300000px;'
        'background:linear-gradient(#c00,#00c)">tall</div></body></html>'
    )
    short = '<html><body style="margin:0"><div style="height:300px">short</div></body></html>'
    tall_shots, short_shots = take_shots([EmailPage(tall), EmailPage(short)], chromium)
    for shot in tall_shots.shots:
        assert Image.open(io.BytesIO(shot.png)).size == (shot.width, MAX_HEIGHT), shot.name
    for shot in short_shots.shots:  # the bound is no padding: a short email is as tall as it is
        assert Image.open(io.BytesIO(shot.png)).height < 1000, shot.name
    pairs = pair_shots(short_shots, tall_shots)
    assert [pair.cut for pair in pairs] == [True] * len(WIDTHS) * len(SCHEMES)
