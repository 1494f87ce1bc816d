"""The archive's Atom feed from `serve` (/feed.xml) and `build --site` (feed.xml): valid Atom
(RFC 4287's rules checked on the parsed document, and read back by feedparser), linked from
every page, drafts never in it with `[serve] publish = "sent"`, hostile text escaped."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import feedparser
import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import Settings
from newsletter.database import open_database
from newsletter.models import DeliveryStatus
from newsletter.web.site.archive import Archive
from newsletter.web.site.feed import FEED_ENTRIES
from support.database import due, plan, record
from support.site import ALICE, running_service

# The feed of the shipped issues, never sent: published by asking for it (publish = "all");
# the default and the policy are tested on their own (NEWSLETTER_SERVE__PUBLISH overrides it).
pytestmark = pytest.mark.usefixtures("all_published")

A = "{http://www.w3.org/2005/Atom}"
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def check_atom(text: str, base_url: str) -> ET.Element:
    """RFC 4287's MUSTs on the parsed document: the feed and each entry have exactly one id,
    title and updated; an author (on the feed); dates in RFC 3339; absolute IRIs; ids unique;
    at most one alternate link per type; a self link to the feed itself."""
    root = ET.fromstring(text.encode("utf-8"))  # noqa: S314 (our own output)
    assert root.tag == f"{A}feed"
    for element in (root, *root.findall(f"{A}entry")):
        for tag in ("id", "title", "updated"):
            assert len(element.findall(f"{A}{tag}")) == 1, (element.tag, tag)
        for tag in ("updated", "published"):
            for stamp in element.findall(f"{A}{tag}"):
                assert RFC3339.fullmatch(stamp.text or ""), stamp.text
        alternates = [
            lk.get("type") for lk in element.findall(f"{A}link") if lk.get("rel") == "alternate"
        ]
        assert len(alternates) == len(set(alternates)) == 1
        for link in element.findall(f"{A}link"):
            assert urlsplit(link.get("href", "")).scheme in ("http", "https")
        assert urlsplit(element.findtext(f"{A}id") or "").scheme in ("http", "https")
    assert root.find(f"{A}author/{A}name") is not None
    ids = [e.findtext(f"{A}id") for e in root.findall(f"{A}entry")]
    assert len(ids) == len(set(ids))
    selves = [lk.get("href") for lk in root.findall(f"{A}link") if lk.get("rel") == "self"]
    assert selves == [f"{base_url}/feed.xml"]
    for content in root.iter(f"{A}content"):
        assert content.get("type") == "html"
    parsed = feedparser.parse(text)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return root


def mark_sent(settings: Settings, list_name: str, addresses: list[str], number: int = 14) -> None:
    with open_database(settings.database_target) as database:
        plan(database, number, list_name, addresses)
        for row in due(database, number, list_name):
            record(database, row.id, DeliveryStatus.SENT)


def add_issue(project: Path, number: int, **replace: str) -> Path:
    source = (project / "issues" / "14.yaml").read_text(encoding="utf-8")
    text = source.replace("number: 14", f"number: {number}", 1)
    for old, new in replace.items():
        text = text.replace(old, new, 1)
    path = project / "issues" / f"{number}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_serve_answers_feed_xml_with_valid_atom(project: Path) -> None:
    with running_service(project) as service:
        answer = httpx.get(f"{service.url}/feed.xml")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/atom+xml; charset=utf-8"
        assert "max-age" in answer.headers["cache-control"]
        root = check_atom(answer.text, service.url)
        parsed = feedparser.parse(answer.text)
        assert parsed.feed.title == "AI系统内容推荐"
        assert parsed.feed.language == "zh-CN"
        [entry] = parsed.entries
        assert entry.link == f"{service.url}/issues/14"
        assert entry.title == "AI系统内容推荐第14期"
        html = entry.content[0].value
        assert '<a href="https://arxiv.org/pdf/2110.15032.pdf">0、OneFlow' in html
        assert "<h2>一、项目</h2>" in html
        assert entry.summary.startswith("OneFlow：从零重新设计分布式深度学习框架")
        assert root.findtext(f"{A}entry/{A}id") == f"{service.url}/issues/14"


def test_an_entry_is_dated_by_its_file_then_by_its_first_send(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    with running_service(project) as service:
        mark_sent(service.settings, "main", [ALICE])
        with open_database(service.settings.database) as database:
            day = min(str(r.sent_at) for r in database.deliveries.rows(14, "main"))[:10]
        entry = feedparser.parse(httpx.get(f"{service.url}/feed.xml").text).entries[0]
        assert entry.updated == f"{day}T00:00:00Z"
        path.write_text(path.read_text(encoding="utf-8") + "date: 2021-11-08\n", encoding="utf-8")
        entry = feedparser.parse(httpx.get(f"{service.url}/feed.xml").text).entries[0]
        assert (entry.published, entry.updated) == ("2021-11-08T00:00:00Z",) * 2


def test_publish_sent_keeps_drafts_and_test_sends_out_of_the_feed(project: Path) -> None:
    with running_service(project, NEWSLETTER_SERVE__PUBLISH="sent") as service:
        feed = f"{service.url}/feed.xml"
        root = check_atom(httpx.get(feed).text, service.url)
        assert root.findall(f"{A}entry") == []  # an empty feed is still a valid one
        mark_sent(service.settings, "staging", ["editor@news.example.org"])
        assert feedparser.parse(httpx.get(feed).text).entries == []
        mark_sent(service.settings, "main", [ALICE])
        entries = feedparser.parse(httpx.get(feed).text).entries
        assert [e.link for e in entries] == [f"{service.url}/issues/14"]


def test_every_page_links_the_feed(project: Path) -> None:
    with running_service(project) as service:
        tag = (
            '<link rel="alternate" type="application/atom+xml" title="AI系统内容推荐" '
            f'href="{service.url}/feed.xml">'
        )
        for path in ("/", "/issues/14", "/unsubscribe", "/issues/99"):
            page = httpx.get(f"{service.url}{path}").text
            assert page.count(tag) == 1, path
            head = page.split("</head>", 1)[0]
            assert tag in head, path


@pytest.mark.slow
def test_the_newest_issues_only_newest_first(project: Path) -> None:
    for number in range(1, 26):
        if number != 14:
            add_issue(project, number)
    with running_service(project) as service:
        entries = feedparser.parse(httpx.get(f"{service.url}/feed.xml").text).entries
    assert [e.link.rsplit("/", 1)[1] for e in entries] == [str(n) for n in range(25, 5, -1)]
    assert len(entries) == FEED_ENTRIES


HOSTILE = """\
number: 15
title: "Tom & Jerry <script>alert(1)</script> ]]>"
sections:
  - title: "A & B </h2>"
    items:
      - title: "<b>not bold</b>"
        summary: "[x](javascript:alert(1)) **<img src=x onerror=alert(1)>**"
        links:
          - {label: "l&l", url: "https://example.org/?a=1&b=2"}
"""


def test_hostile_text_in_an_issue_stays_text(project: Path) -> None:
    (project / "issues" / "15.yaml").write_text(HOSTILE, encoding="utf-8")
    base = "https://n.example"
    settings = Settings.model_validate(
        {"root": project, "newsletter": {"base_url": base}, "serve": {"publish": "all"}}
    )
    root = check_atom(Archive(settings).feed(), base)
    entry = next(
        e for e in root.findall(f"{A}entry") if e.findtext(f"{A}id") == f"{base}/issues/15"
    )
    assert entry.findtext(f"{A}title") == "Tom & Jerry <script>alert(1)</script> ]]>"
    content = entry.findtext(f"{A}content") or ""
    assert "<script" not in content
    assert "<b>" not in content
    # Inline HTML in an issue's text is dropped with its tags (check warns), its words kept.
    assert "<img" not in content
    assert "onerror" not in content
    assert "not bold" in content
    assert "<h2>A &amp; B</h2>" in content  # an English issue: no numbers (issue 41)
    assert 'href="https://example.org/?a=1&amp;b=2"' in content
    assert "javascript" not in content  # never a link, and the target not shown


def test_a_table_reaches_the_feed_as_a_table(project: Path) -> None:
    # issue 30: tables are blocks now; the feed's template had no branch and dropped them.
    (project / "issues" / "16.md").write_text(
        "---\nnumber: 16\ntitle: Tables\n---\n## Releases\n\n"
        "| Package | Version |\n|---|---|\n| [aeson](https://e.org/aeson) | 3.1 |\n",
        encoding="utf-8",
    )
    base = "https://n.example"
    settings = Settings.model_validate(
        {"root": project, "newsletter": {"base_url": base}, "serve": {"publish": "all"}}
    )
    root = check_atom(Archive(settings).feed(), base)
    entry = next(
        e for e in root.findall(f"{A}entry") if e.findtext(f"{A}id") == f"{base}/issues/16"
    )
    content = entry.findtext(f"{A}content") or ""
    assert (
        "<table><tr><th><p>Package</p></th><th><p>Version</p></th></tr>"
        '<tr><td><p><a href="https://e.org/aeson">aeson</a></p></td><td><p>3.1</p></td></tr>'
        "</table>"
    ) in content


def test_build_site_writes_the_feed_serve_answers(project: Path, settings: Settings) -> None:
    result = CliRunner().invoke(cli, ["build", "--site", "site"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "site/  web archive: 3 pages (1 issue(s), the index and how-to-unsubscribe) and feed.xml"
    )
    written = (project / "site" / "feed.xml").read_text(encoding="utf-8")
    assert written == Archive(settings).feed()
    check_atom(written, settings.newsletter.base_url)
    for page in ("index.html", "issues/14/index.html", "unsubscribe/index.html"):
        html = (project / "site" / page).read_text(encoding="utf-8")
        assert f'href="{settings.newsletter.base_url}/feed.xml"' in html, page


@pytest.mark.parametrize("day", [None, dt.date(2021, 11, 8)])
def test_the_feed_is_the_same_document_every_time(project: Path, day: dt.date | None) -> None:
    if day is not None:
        path = project / "issues" / "14.yaml"
        path.write_text(path.read_text(encoding="utf-8") + f"date: {day}\n", encoding="utf-8")
    settings = Settings.model_validate({"root": project})
    assert Archive(settings).feed() == Archive(settings).feed()
