"""Bytes and time of the render (run: `make bench`, or `python benchmarks/render.py [--reference
DIR]`): issue 14, and the 150-item English weekly of tests/data/weeklies.

Bytes are the HTML part as it goes on the wire (encoded, what Gmail's ~102 KB clip counts),
measured on the sample message. Fixed markup and the cost of one more item or section come from
rendering the same newsletter with 1 and 101 items (or 1 and 31 sections) and dividing the
difference; "beyond its text" subtracts the item's own title, URL and summary at the part's
encoding ratio. Time is the full render (load + validate + Jinja + MJML + inline + text), css-inline
and premailer interleaved in one process: their ratio is the same-run reference.

Code (issue 42): the long essay of tests/support/essay.py, in the shape of the issue's 45 KB
Chinese essay (精读《Function Component 入门》: 66 code blocks, 314 inline `code` spans), rendered
whole. A code block's frame is the bytes of its element beyond its escaped text: one styled
<pre> with the text inside, 209 B raw (286 B encoded), the same for any block, nothing per line
or per token; it was 356 B (a styled <code> inside the styled <pre>). Why the essay's 45 KB
became 187.5 KB of HTML part: not per-token or per-line styles (there is no highlighting), but
(1) every inline `code` span carried its whole style, 164 B a span with its tags (now 109 B: a
short font stack, no border-radius), 314 spans = 50 KB of the part, more than the essay's text;
(2) the 66 blocks' 356-byte frames, 23 KB; (3) Chinese text cannot go quoted-printable (9 bytes
a character), so the part goes base64, and every byte, markup too, costs 1.37 on the wire. Now
151.7 KB, and its email keeps 17 of the second section's 27 parts and 6 blocks of the 18th
where it kept none.

--reference DIR measures an older checkout of the code (a `git archive` of it in DIR) in a child
process, with the same synthetic issues and the weekly as its YAML format can hold it (each list
of links a section's items, other text collapsed into summaries), and times its render of issue
14 alternately with this one: the "before" column.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import os
import statistics
import subprocess
import sys
import time
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = 40
RENDER_TARGET_MS = 5.0
ITEM = "Item title number {i:03d}"
SUMMARY = "A one-line summary of what this link is about, as issue 14's items have."


def measure(project: Path, weekly: dict[str, Any] | None, runs: int) -> dict[str, Any]:
    """Every figure, with only what old and new code share: run in this process, or in a
    child process over an older checkout (then `weekly` is its YAML-shaped data)."""
    from newsletter.checks.lint import encoded_size
    from newsletter.config.settings import load_settings
    from newsletter.issues import load_issue
    from newsletter.mail.message import sample_message
    from newsletter.models import Issue, Item, Link, Section
    from newsletter.rendering.render import render_issue

    os.chdir(project)
    chinese = load_settings(project / "newsletter.toml", environ={})
    english = load_settings(
        project / "newsletter.toml",
        environ={"NEWSLETTER_NEWSLETTER__LANGUAGE": "en", "NEWSLETTER_RENDER__NUMBERING": "none"}
        if "numbering" in type(chinese.render).model_fields
        else {"NEWSLETTER_NEWSLETTER__LANGUAGE": "en"},
    )

    def wire(settings: Any, issue: Any) -> tuple[int, int]:
        rendered = render_issue(issue, settings)
        data = sample_message(rendered, settings, "main")[0].data
        parsed = email.message_from_bytes(data, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        part = parsed.get_body(("html",))
        assert part is not None
        return encoded_size(part), len(str(part.get_content()).encode())

    def synthetic(items: int, sections: int = 1, summary: str = "") -> Any:
        def item(n: int) -> Any:
            links = [Link(label="Link", url=f"https://example.org/posts/{n:03d}")]
            if summary:  # issue 14's shape: a summary and two links, the first the title's
                links.append(Link(label="Code", url=f"https://example.org/code/{n:03d}"))
            # Validated from data, as a file is: the title and summary are Markdown text.
            return Item.model_validate(
                {"title": ITEM.format(i=n), "summary": summary, "links": links}
            )

        per = items // sections
        return Issue(
            number=1,
            title="Weekly 1",
            sections=[
                Section.model_validate(
                    {"title": f"Section {s}", "items": [item(s * per + i) for i in range(per)]}
                )
                for s in range(sections)
            ],
        )

    def costs(settings: Any) -> dict[str, float]:
        one, _ = wire(settings, synthetic(1))
        many, many_raw = wire(settings, synthetic(101))
        ratio = many / many_raw
        per_item = (many - one) / 100
        text = len(ITEM.format(i=0)) + len("https://example.org/posts/000")
        shaped_one, _ = wire(settings, synthetic(1, summary=SUMMARY))
        shaped_many, _ = wire(settings, synthetic(101, summary=SUMMARY))
        shaped_text = text + len(SUMMARY) + len("https://example.org/code/000") + 40
        sections, _ = wire(settings, synthetic(31, 31))
        return {
            "fixed": one - per_item,
            "item": per_item - text * ratio,
            "shaped": (shaped_many - shaped_one) / 100 - shaped_text * ratio,
            "section": (sections - one - 30 * per_item) / 30,
        }

    figures: dict[str, Any] = {"zh": costs(chinese), "en": costs(english)}
    figures["issue14"] = wire(chinese, load_issue(chinese.issues_dir, 14))[0]
    if weekly is not None:
        figures["weekly"] = wire(english, Issue.model_validate(weekly))[0]
    for _ in range(3):  # warm up: imports, template compilation
        render_issue(load_issue(chinese.issues_dir, 14), chinese)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        render_issue(load_issue(chinese.issues_dir, 14), chinese)
        samples.append((time.perf_counter() - start) * 1000)
    figures["render14"] = statistics.median(samples)
    return figures


def as_yaml_issue(issue: Any) -> dict[str, Any]:
    """The weekly as issue 14's YAML format holds it: items with a title and one link; every
    other text of a section collapsed into the summary of an item named after the section."""
    from newsletter.content import content_text

    sections = []
    for section in issue.sections:
        items = []
        text = content_text(section.intro)
        if text:
            items.append({"title": str(section.title), "summary": text})
        for item in section.items:
            entry: dict[str, Any] = {"title": str(item.title or section.title)}
            if item.url:
                entry["links"] = [{"label": "Link", "url": item.url}]
            if item.summary:
                entry["summary"] = content_text(item.summary)
            items.append(entry)
        sections.append({"title": str(section.title), "items": items or [{"title": "…"}]})
    return {"number": issue.number, "title": issue.title, "sections": sections}


def time_renders(settings: Any, path: Path, runs: int) -> dict[str, float]:
    """Median full render of one issue with each inliner, interleaved; a Markdown body is read
    afresh each time (markup/document.py remembers the pieces a save did not change)."""
    from newsletter.issues import load_issue_file
    from newsletter.markup import document
    from newsletter.rendering.render import render_issue

    def forget() -> None:
        document._tokens.cache_clear()
        document._definitions.cache_clear()

    variants = {
        name: settings.model_copy(
            update={"render": settings.render.model_copy(update={"inliner": name})}
        )
        for name in ("css-inline", "premailer")
    }
    for variant in variants.values():
        render_issue(load_issue_file(path), variant)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, variant in variants.items():
            forget()
            start = time.perf_counter()
            render_issue(load_issue_file(path), variant)
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


class _Frames(HTMLParser):
    """Each `code` element of an HTML part, by kind (a block's <pre>, an inline span): its
    frame, the bytes of the element that are not its escaped text (its tags, their style
    attributes, any element inside it); and the part's bytes of text and of style attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.frames: dict[str, list[int]] = {"pre": [], "code": []}
        self.text = 0
        self.styles: dict[str, int] = {}
        self._open: list[str] = []  # the code elements the parser is inside

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        size = len((self.get_starttag_text() or "").encode())
        for name, value in attrs:
            if name == "style" and value is not None:
                kind = tag if tag in self.frames else "other"
                self.styles[kind] = self.styles.get(kind, 0) + len(f' style="{value}"'.encode())
        if self._open:  # an element inside a code element is part of its frame
            self.frames[self._open[0]][-1] += size
        if tag in self.frames and not self._open:
            self.frames[tag].append(size)
        if tag in self.frames or self._open:
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self.frames[self._open[0]][-1] += len(f"</{tag}>")
            self._open.pop()

    def _text(self, raw: str) -> None:
        self.text += len(raw.encode())

    def handle_data(self, data: str) -> None:
        self._text(data)

    def handle_entityref(self, name: str) -> None:
        self._text(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self._text(f"&#{name};")


def code_costs(settings: Any, project: Path) -> dict[str, float]:
    """What code costs in the long essay of tests/support/essay.py (66 code blocks, three
    inline spans a paragraph), rendered whole: a block's and a span's frame in raw bytes and
    on the wire (at the part's encoding ratio), and where the part's bytes go."""
    from newsletter.issues import load_issue_file
    from newsletter.rendering.clip import wire_size
    from newsletter.rendering.render import render_issue
    from support.essay import long_essay

    markdown = long_essay(903, shape="items")
    path = project / "issues" / "903.md"
    path.write_text(markdown, encoding="utf-8")
    part = render_issue(load_issue_file(path), settings, whole=True).html
    path.unlink()
    raw, wire = len(part.encode()), wire_size(part)
    parser = _Frames()
    parser.feed(part)
    block, span = parser.frames["pre"], parser.frames["code"]
    return {
        "markdown": len(markdown.encode()),
        "raw": raw,
        "wire": wire,
        "ratio": wire / raw,
        "blocks": len(block),
        "block": statistics.median(block),
        "block_wire": statistics.median(block) * wire / raw,
        "spans": len(span),
        "span": statistics.median(span),
        "text": parser.text,
        "pre_styles": parser.styles.get("pre", 0),
        "code_styles": parser.styles.get("code", 0),
        "other_markup": raw - parser.text - sum(block) - sum(span),
    }


def child(reference: Path, weekly: dict[str, Any], runs: int) -> dict[str, Any]:
    """The figures of the code in `reference`, measured in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(reference / "src")}
    benchmarks, project = str(ROOT / "benchmarks"), str(reference)
    code = (
        f"import json, sys; sys.path.insert(0, {benchmarks!r}); from render import measure; "
        f"print(json.dumps(measure(__import__('pathlib').Path({project!r}), "
        f"json.load(sys.stdin), {runs})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(weekly),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    figures: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", type=Path, help="an older checkout to measure beside")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import tempfile

    from newsletter.issues import load_issue_file
    from support.project import copy_project
    from support.weeklies import ENGLISH, add_weekly, weekly_settings

    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp) / "project")
        weekly_path = add_weekly(project, ENGLISH)
        weekly = load_issue_file(weekly_path)
        now = measure(project, None, args.runs)
        from newsletter.draft import review

        english = weekly_settings(project, ENGLISH)
        now["weekly"] = review(english, weekly_path, "main").html_size
        before = child(args.reference, as_yaml_issue(weekly), args.runs) if args.reference else {}
        if args.reference:  # the render of issue 14 again, alternating with the reference
            mine, theirs = [], []
            for _ in range(5):
                mine.append(measure(project, None, args.runs)["render14"])
                theirs.append(child(args.reference, as_yaml_issue(weekly), args.runs)["render14"])
            now["render14"], before["render14"] = statistics.median(mine), statistics.median(theirs)
        os.chdir(project)
        from newsletter.config.settings import load_settings

        zh = load_settings(project / "newsletter.toml", environ={})
        code = code_costs(zh, project)
        times14 = time_renders(zh, project / "issues" / "14.yaml", args.runs)
        times150 = time_renders(english, weekly_path, max(5, args.runs // 4))

    def kb(value: float) -> str:
        return f"{value / 1024:.1f} KB"

    rows = [
        ("issue 14: encoded HTML part", "issue14", kb),
        ("150-item weekly: encoded HTML part", "weekly", kb),
        ("fixed markup (zh newsletter)", ("zh", "fixed"), kb),
        ("fixed markup (en newsletter)", ("en", "fixed"), kb),
        ("per title-and-link item beyond its text (zh)", ("zh", "item"), lambda v: f"{v:.0f} B"),
        ("per title-and-link item beyond its text (en)", ("en", "item"), lambda v: f"{v:.0f} B"),
        (
            "per issue-14 item (summary, 2 links) beyond text",
            ("zh", "shaped"),
            lambda v: f"{v:.0f} B",
        ),
        ("per section (zh)", ("zh", "section"), lambda v: f"{v:.0f} B"),
        ("full render of issue 14 (median)", "render14", lambda v: f"{v:.2f} ms"),
    ]

    def value(figures: dict[str, Any], key: Any) -> Any:
        if isinstance(key, tuple):
            return figures.get(key[0], {}).get(key[1])
        return figures.get(key)

    print(f"Render figures (Python {sys.version.split()[0]}; bytes encoded, as on the wire)")
    print(f"{'figure':<50} {'now':>12} {'before' if before else '':>12}")
    for label, key, shown in rows:
        old = value(before, key)
        print(
            f"{label:<50} {shown(value(now, key)):>12} {shown(old) if old is not None else '':>12}"
        )
    print()
    ratio14 = times14["premailer"] / times14["css-inline"]
    ratio150 = times150["premailer"] / times150["css-inline"]
    print(f"{'full render, median of runs':<50} {'css-inline':>12} {'premailer':>12} {'ratio':>7}")
    print(
        f"{'issue 14':<50} {times14['css-inline']:>9.2f} ms {times14['premailer']:>9.2f} ms "
        f"{ratio14:>6.1f}x"
    )
    print(
        f"{'150-item weekly (Markdown)':<50} {times150['css-inline']:>9.2f} ms "
        f"{times150['premailer']:>9.2f} ms {ratio150:>6.1f}x"
    )
    print()
    print(
        f"code, the long essay ({code['markdown'] / 1024:.1f} KB of Markdown, "
        f"{code['blocks']} code blocks, {code['spans']} inline spans): HTML part "
        f"{kb(code['raw'])} raw, {kb(code['wire'])} encoded ({code['ratio']:.2f}x)"
    )
    print(
        f"{'a code block: its frame (bytes beyond its escaped text)':<58} "
        f"{code['block']:>5.0f} B raw, {code['block_wire']:>4.0f} B encoded"
    )
    print(f"{'an inline code span: its frame':<58} {code['span']:>5.0f} B raw")
    print(
        f"{'the part raw: text / code spans / code blocks / the rest':<58} "
        f"{kb(code['text'])} / {kb(code['spans'] * code['span'])} / "
        f"{kb(code['blocks'] * code['block'])} / {kb(code['other_markup'])}"
    )
    met = "met" if times14["css-inline"] < RENDER_TARGET_MS else "NOT met"
    print(f"issue 14 with css-inline, target < {RENDER_TARGET_MS:.0f} ms: {met}")


if __name__ == "__main__":
    main()
