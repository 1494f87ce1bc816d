"""Links the editor marks dead in an issue file (issue 33, point 5): `serve`'s archive page
strikes each and notes it, with its replacement linked if one is given, in the newsletter's
language; the email (the rendered message, its links) is exactly what it was; `dead:` is read
from YAML and from a Markdown front matter, and its faults are named at their file:line."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.draft import review
from newsletter.errors import IssueError
from newsletter.issues import load_issue_file
from newsletter.web.site.archive import Archive
from support.site import running_service

PAPER = "https://arxiv.org/pdf/2110.15032.pdf"  # issue 14's, in items 1 and 2
CODE = "https://github.com/Oneflow-Inc/oneflow"
MOVED = "https://github.com/Oneflow-Inc/oneflow-next"
KEPT = "https://github.com/hpcaitech/ColossalAI"


class Anchors(HTMLParser):
    """Each link's href, whether it is marked dead, and the text that follows its </a>."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, object]] = []
        self.styles: list[str] = []
        self._in_style = False
        self._in_link = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a":
            self.links.append(
                {"href": found.get("href"), "dead": "data-dead" in found, "after": ""}
            )
            self._in_link = True
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False
        self._in_link = self._in_link and tag != "a"

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        elif self.links and not self._in_link:
            self.links[-1]["after"] = str(self.links[-1]["after"]) + data


def mark_dead(project: Path, entries: str) -> None:
    path = project / "issues" / "14.yaml"
    path.write_text(path.read_text(encoding="utf-8") + entries, encoding="utf-8")


@pytest.mark.slow
def test_the_archive_page_strikes_dead_links_and_the_email_is_unchanged(
    all_published: Path,
) -> None:
    project = all_published
    settings = load_settings(project / "newsletter.toml", environ={})
    path = settings.issues_dir / "14.yaml"
    sent = review(settings, path, "main")
    mark_dead(project, f"dead:\n  - {PAPER}\n  - {CODE}: {MOVED}\n")
    with running_service(project) as service:
        page = httpx.get(f"{service.url}/issues/14", timeout=30)
        feed = feedparser.parse(httpx.get(f"{service.url}/feed.xml", timeout=30).text)
    assert page.status_code == 200
    # The feed's entry says so too, after each of the link's places.
    (entry,) = [e for e in feed.entries if e.link.endswith("/issues/14")]
    content = entry.content[0].value
    assert content.count("(链接已失效)") == content.count(f'href="{PAPER}"') > 0
    anchors = Anchors()
    anchors.feed(page.text)
    by_url: dict[object, list[dict[str, object]]] = {}
    for link in anchors.links:
        by_url.setdefault(link["href"], []).append(link)
    # Both items' paper link, and their titles, which link the first of an item's links.
    assert len(by_url[PAPER]) == 4
    assert all(link["dead"] for link in by_url[PAPER])
    assert all(str(link["after"]).startswith(" (链接已失效)") for link in by_url[PAPER])
    (code,) = by_url[CODE]
    assert code["dead"]
    assert str(code["after"]).startswith(" (链接已失效，现在在 ")
    # The replacement is a link of its own, right after, and is not struck.
    moved = anchors.links[anchors.links.index(code) + 1]
    assert moved == {"href": MOVED, "dead": False, "after": str(moved["after"])}
    assert not any(link["dead"] for link in by_url[KEPT])
    assert sum(1 for link in anchors.links if link["dead"]) == 5
    assert any("a[data-dead]{text-decoration:line-through!important}" in s for s in anchors.styles)
    # What was sent, and what a send would send now, is the same email.
    after = review(load_settings(project / "newsletter.toml", environ={}), path, "main")
    assert after.html == sent.html
    assert after.text == sent.text
    assert "链接已失效" not in after.html
    assert "data-dead" not in after.html


@pytest.mark.browser
@pytest.mark.slow
def test_a_browser_shows_them_struck_over_the_emails_own_style(project: Path, browser: Any) -> None:
    """The email's inlined `text-decoration:none` on its title links loses to the strike."""
    mark_dead(project, f"dead:\n  - {PAPER}\n")
    page_file = project / "page.html"
    settings = load_settings(project / "newsletter.toml", environ={})
    page_file.write_text(Archive(settings).issue_page(14), encoding="utf-8")
    context = browser.new_context()
    context.route("http*://**/*", lambda route: route.abort())
    try:
        page = context.new_page()
        page.goto(page_file.as_uri())
        lines = page.evaluate(
            "(url) => [...document.querySelectorAll('a')].filter((a) => a.href === url)"
            ".map((a) => getComputedStyle(a).textDecorationLine)",
            PAPER,
        )
        kept = page.evaluate(
            "[...document.querySelectorAll('a:not([data-dead])')]"
            ".map((a) => getComputedStyle(a).textDecorationLine)"
        )
    finally:
        context.close()
    assert lines == ["line-through"] * 4
    assert "line-through" not in kept


def test_no_dead_links_leave_the_page_as_it_was(project: Path) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    plain = Archive(settings).issue_page(14)
    assert "data-dead" not in plain
    assert "dead-link" not in plain


def test_a_markdown_front_matter_marks_them_too(tmp_path: Path) -> None:
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    path = root / "issues" / "1.md"
    text = path.read_text(encoding="utf-8")
    assert "(https://example.org/another)" in text
    path.write_text(
        text.replace("\n---\n", "\ndead:\n  - https://example.org/another\n---\n", 1),
        encoding="utf-8",
    )
    settings = load_settings(root / "newsletter.toml", environ={})
    anchors = Anchors()
    anchors.feed(Archive(settings).issue_page(1))
    dead = [link for link in anchors.links if link["dead"]]
    assert [link["href"] for link in dead] == ["https://example.org/another"]
    assert str(dead[0]["after"]).startswith(" (link dead)")


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        (
            "  - https://example.org/nowhere",
            "dead[0]",
            "https://example.org/nowhere is not a link of this issue: copy the link as the "
            "issue has it",
        ),
        ("  - 42", "dead[0]", "must be a URL, or `URL: its replacement`"),
        (
            "  - https://example.org/another: ftp://files.example.org/",
            "dead[0].replacement",
            "must be an absolute http:// or https:// URL",
        ),
    ],
)
def test_a_fault_in_dead_is_named_at_its_line(
    tmp_path: Path, entry: str, field: str, message: str
) -> None:
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    path = root / "issues" / "1.md"
    text = path.read_text(encoding="utf-8").replace("\n---\n", f"\ndead:\n{entry}\n---\n", 1)
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index(entry) + 1
    with pytest.raises(IssueError) as raised:
        load_issue_file(path, display="issues/1.md")
    said = raised.value.message
    assert f"issues/1.md:{line}: {field}: " in said, said
    assert message in said, said
