"""issues/14.yaml against the seed it was transcribed from: every word and link must survive."""

from __future__ import annotations

import re
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.content import content_text
from newsletter.issues import load_issue

SEED = Path(__file__).parent / "data" / "seed-14.txt"
SECTION = re.compile(r"^([一二三四五六七八九十]+)、(.+)$")
ITEM = re.compile(r"^(\d+)、(.+)$")
LINK = re.compile(r"^(论文|代码|链接)：(\S+)$")


def parse_seed() -> tuple[str, list[tuple[str, list[dict[str, object]]]]]:
    """The seed's own structure, read with nothing but its visible conventions."""
    lines = [line.strip() for line in SEED.read_text(encoding="utf-8").splitlines() if line.strip()]
    heading, sections = lines[0], []
    for line in lines[1:]:
        if m := SECTION.match(line):
            sections.append((m.group(2), []))
        elif m := ITEM.match(line):
            sections[-1][1].append(
                {"n": int(m.group(1)), "title": m.group(2), "summary": [], "links": []}
            )
        elif m := LINK.match(line):
            url = m.group(2).rstrip("；;，,。")
            sections[-1][1][-1]["links"].append((m.group(1), url))  # type: ignore[union-attr]
        else:
            sections[-1][1][-1]["summary"].append(line)  # type: ignore[union-attr]
    return heading, sections


def test_issue_14_is_the_whole_seed(settings: Settings) -> None:
    heading, seed_sections = parse_seed()
    issue = load_issue(settings.issues_dir, 14)
    assert issue.title == heading == "AI系统内容推荐第14期"
    assert issue.number == 14
    assert [s.title.text for s in issue.sections] == [title for title, _ in seed_sections]
    assert sum(len(items) for _, items in seed_sections) == 13
    for section, (_, seed_items) in zip(issue.sections, seed_sections, strict=True):
        assert len(section.items) == len(seed_items)
        for index, (item, seed) in enumerate(zip(section.items, seed_items, strict=True)):
            assert seed["n"] == index, "the seed numbers items from 0 within a section"
            assert item.title is not None
            assert item.title.text == seed["title"]
            assert content_text(item.summary) == "".join(seed["summary"])  # type: ignore[arg-type]
            assert [(link.label, link.url) for link in item.links] == seed["links"]


def test_stray_punctuation_is_gone_from_urls(settings: Settings) -> None:
    issue = load_issue(settings.issues_dir, 14)
    urls = [link.url for s in issue.sections for i in s.items for link in i.links]
    assert "https://arxiv.org/abs/2110.11403" in urls
    assert not [u for u in urls if re.search(r"[；;，,。]$", u)]
