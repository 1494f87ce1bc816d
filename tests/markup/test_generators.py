"""Site generators' syntax in, what their sites show out, in both parts of the email (issue 42,
Deliver 1-3).

Six weeklies in the shapes of Hugo, Jekyll, VuePress, Docusaurus, MkDocs and Eleventy ones
(tests/data/weeklies/generators), pasted with only their front matter changed, check with no
error, and nothing of their generator's syntax reaches a reader without a finding at its line.
Then each point on its own: every Hugo shortcode kind, VuePress and Docusaurus containers, MkDocs
admonitions, `{% highlight %}`, `{% include %}`, template addresses (`url`, `relative_url`,
`absolute_url`, and any other filter), an image address with a space, `<figure>`, links inside
`<code>`, and a weekly whose top heading is `###`. The email is read with the HTML parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.checks.lint import Finding
from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.content import Callout, CodeBlock, Paragraph, walk_blocks
from newsletter.draft import review
from newsletter.models import Issue
from support.project import copy_project

GENERATORS = Path(__file__).resolve().parents[1] / "data" / "weeklies" / "generators"
WEEKLIES = ("hugo", "jekyll", "vuepress", "docusaurus", "mkdocs", "eleventy")
# What a generator's own syntax looks like when it reaches a reader.
SYNTAX = ("{{", "}}", "{%", "%}", ":::", "!!!", "???", "<<", ">>")
# The words the email shows, in English (the Chinese learning weekly keeps the project's own).
ENGLISH = {"NEWSLETTER_NEWSLETTER__LANGUAGE": "en"}


class Email(HTMLParser):
    """The HTML part as a reader meets it: its links, images, shown words and callout boxes."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.words: list[str] = []
        self.callouts: list[str] = []  # each callout table's classes
        self.code: list[str] = []  # the text of each <pre>
        self.code_links: list[str] = []  # links inside <code> (or a <code> inside a link)
        self._hidden = 0
        self._pre = -1
        self._code = 0
        self._link = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag in ("style", "script", "title", "head"):
            self._hidden += 1
        elif tag == "a":
            self.hrefs.append(values.get("href", ""))
            self._link = values.get("href", "")
            if self._code:
                self.code_links.append(self._link)
        elif tag == "img":
            self.srcs.append(values.get("src", ""))
        elif tag == "table" and "nl-callout" in values.get("class", "").split():
            self.callouts.append(values["class"])
        elif tag == "pre":
            self._pre = len(self.code)
            self.code.append("")
        elif tag == "code":
            self._code += 1
            if self._link and self._pre == -1:
                self.code_links.append(self._link)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title", "head"):
            self._hidden -= 1
        elif tag == "a":
            self._link = ""
        elif tag == "pre":
            self._pre = -1
        elif tag == "code":
            self._code -= 1

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        self.words.append(data)
        if self._pre != -1:
            self.code[self._pre] += data

    @property
    def shown(self) -> str:
        return "".join(self.words)


@dataclass
class Arrived:
    """One issue as the sample recipient gets it, and what the checks said."""

    source: str
    issue: Issue
    html: str
    text: str
    findings: list[Finding]
    page: Email = field(default_factory=Email)

    def line_of(self, written: str) -> int:
        """The issue file's line (from 1) that holds `written`."""
        lines = self.source.split("\n")
        return next(n for n, line in enumerate(lines, start=1) if written in line)

    def at(self, line: int) -> list[str]:
        return [f.message for f in self.findings if f.line == line]

    @property
    def errors(self) -> list[str]:
        return [f.message for f in self.findings if f.level == "error"]


def arrive(project: Path, source: str, environ: dict[str, str] | None = None) -> Arrived:
    """`source` as issues/N.md of `project` (N its front matter's number), reviewed as `check`
    reviews it; the HTML part read by the parser."""
    number = next(line.split()[1] for line in source.split("\n") if line.startswith("number:"))
    path = project / "issues" / f"{number}.md"
    path.write_text(source, encoding="utf-8")
    settings = load_settings(project / "newsletter.toml", environ=environ or {})
    draft = review(settings, path, "main")
    # The parts as a reader's client shows them: lines end in CRLF on the wire, here in "\n".
    html, text = draft.html.replace("\r\n", "\n"), draft.text.replace("\r\n", "\n")
    arrived = Arrived(source, draft.issue, html, text, draft.findings)
    arrived.page.feed(html)
    return arrived


def snippet(body: str, number: int = 77) -> str:
    """A pasted issue of `body` under the front matter an editor writes."""
    front = f"---\nnumber: {number}\ntitle: Issue {number}\nbase: https://w.example.org/{number}/\n"
    return f"{front}---\n{body}"


class Weeklies:
    """The six weeklies, each as its readers get it, reviewed when a test first asks for it
    (a weekly that does not load fails the tests that read it, and only those)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.arrived: dict[str, Arrived] = {}

    def __getitem__(self, name: str) -> Arrived:
        if name not in self.arrived:
            source = (GENERATORS / f"{name}.md").read_text(encoding="utf-8")
            environ = None if name == "vuepress" else ENGLISH
            self.arrived[name] = arrive(self.project, source, environ)
        return self.arrived[name]


@pytest.fixture(scope="module")
def weeklies(tmp_path_factory: pytest.TempPathFactory) -> Weeklies:
    return Weeklies(copy_project(tmp_path_factory.mktemp("generators") / "project"))


def callouts(issue: Issue) -> list[Callout]:
    blocks = [*issue.intro, *issue.outro]
    for section in issue.sections:
        blocks += [*section.intro, *(b for item in section.items for b in item.summary)]
    return [block for block in walk_blocks(blocks) if isinstance(block, Callout)]


def title(callout: Callout) -> str:
    return "".join(getattr(span, "text", "") for span in callout.title)


# The lines of each weekly whose tag the email has nothing of: each must have a finding.
LEFT_OUT = {
    "hugo": ["{{< sponsor >}}"],
    "jekyll": [
        "{% include sponsor.html %}",
        "{{ site.url }}/archive/",
        "{{ site.swift_version }}",
        "{% include task_remind.html %}",
    ],
}
# Links each weekly writes (shortcodes and template addresses resolved) that both parts carry.
LINKS = {
    "hugo": [
        "https://survey.example.org/2026?source=opsweekly",
        "https://www.youtube.com/watch?v=GyZHySRUKXI",
        "https://x.com/kubeweekly/status/1501955445094699024",
        "https://grafana.example.org/d/1",
    ],
    "jekyll": [
        "https://bugs.example.org/SR-1",
        "https://swiftbrief.example.org/proposals/0011/",
    ],
    "vuepress": ["https://tool.example.org/"],
    "docusaurus": ["https://stats.example.org/charts?package=proj"],
    "mkdocs": ["https://catalog.example.org/plugins"],
    "eleventy": [
        "https://github.com/example/engine/releases/tag/v0.4.0",
        "https://engine.example.org/sponsorship/",
        "https://engine.example.org/blog/2025/11/21/tiers/",
        "https://doc.example.org/engine/struct.WebView.html",
    ],
}


@pytest.mark.parametrize("name", WEEKLIES)
def test_a_generators_weekly_checks_clean_and_none_of_its_syntax_reaches_a_reader(
    weeklies: Weeklies, name: str
) -> None:
    arrived = weeklies[name]
    assert arrived.errors == []
    for written in LEFT_OUT.get(name, []):
        line = arrived.line_of(written)
        assert arrived.at(line), f"{written} (line {line}) left out without a finding"
    # What is left: nothing of the syntax in either part, every link in both.
    for mark in SYNTAX:
        assert mark not in arrived.page.shown, mark
        assert mark not in arrived.text, mark
    for url in LINKS[name]:
        assert url in arrived.page.hrefs, url
        assert f"({url})" in arrived.text, url


@pytest.mark.parametrize(
    ("written", "url", "label"),
    [
        ("{{< youtube GyZHySRUKXI >}}", "https://www.youtube.com/watch?v=GyZHySRUKXI", "▶ video"),
        (
            '{{< x user="kubeweekly"',
            "https://x.com/kubeweekly/status/1501955445094699024",
            "post by @kubeweekly",
        ),
        ("{{< tweet 1293748173937061888 >}}", "https://x.com/i/status/1293748173937061888", "post"),
        (
            '{{< tweet user="opsfolk"',
            "https://x.com/opsfolk/status/1202601312111730689",
            "post by @opsfolk",
        ),
        ("<center>{{< tweet", "https://x.com/i/status/1067537816324845569", "post"),
        ('{{< vimeo id="146022717"', "https://vimeo.com/146022717", "▶ Incident review"),
        ("{{< instagram", "https://www.instagram.com/p/BWNjjyYFxVx/", "Instagram post"),
        (
            "{{< gist opsfolk",
            "https://gist.github.com/opsfolk/45a32a7df6ea5b4efec7a7dd3bf2fc95",
            "gist 45a32a7df6ea5b4efec7a7dd3bf2fc95",
        ),
        ("{{% youtube", "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "▶ Pager duty, sung"),
    ],
    ids=[
        *("youtube", "x", "tweet", "tweet-user", "tweet-in-center", "vimeo", "instagram"),
        *("gist", "percent-form"),
    ],
)
def test_each_hugo_shortcode_becomes_a_link_to_what_it_shows(
    weeklies: Weeklies, written: str, url: str, label: str
) -> None:
    arrived = weeklies["hugo"]
    assert url in arrived.page.hrefs
    assert f"{label} ({url})" in arrived.text
    assert arrived.at(arrived.line_of(written)) == []  # shown, so nothing to say


def test_a_figure_shortcode_over_two_lines_is_an_image_with_its_caption_and_link(
    weeklies: Weeklies,
) -> None:
    arrived = weeklies["hugo"]
    assert "https://ops.example.org/img/421-budgets.png" in arrived.page.srcs
    assert "https://grafana.example.org/d/1" in arrived.page.hrefs
    assert "Error budgets, week 49" in arrived.page.shown
    assert "A dashboard of error budgets" in arrived.text
    assert 'caption="' not in arrived.text  # its second line is no paragraph of its own


def test_an_unknown_shortcode_is_left_out_with_a_warning_naming_it(
    weeklies: Weeklies,
) -> None:
    arrived = weeklies["hugo"]
    [message] = arrived.at(arrived.line_of("{{< sponsor >}}"))
    assert "{{< sponsor >}}" in message
    assert "left out" in message


def test_containers_become_callouts_with_their_kind_and_title(
    weeklies: Weeklies,
) -> None:
    """VuePress `::: warning 📜 title` (its `::: right` only places a line), `:::tip`,
    `::: details title`, `::::` around `:::`; Docusaurus `:::note`, `:::tip[Title]`, `:::info
    Title`, nested."""
    vuepress, docusaurus = weeklies["vuepress"], weeklies["docusaurus"]
    found = [(c.tone, title(c)) for c in callouts(vuepress.issue)]
    assert found == [
        ("warning", "📜 摘录"),
        ("tip", ""),
        ("details", "点击展开"),
        ("danger", "外层"),
        ("tip", "内层"),
    ]
    warning, *_, outer, inner = callouts(vuepress.issue)
    assert [type(b) for b in warning.blocks] == [Paragraph, Paragraph]  # `::: right`: no box
    assert inner in outer.blocks
    found = [(c.tone, title(c)) for c in callouts(docusaurus.issue)]
    assert found == [
        ("note", ""),
        ("tip", "Try it"),
        ("info", "Titled the v2 way"),
        ("warning", "Outer"),
        ("danger", "Inner"),
    ]
    # A box each in the HTML part, its kind's colour named; its kind in words in the text.
    assert len(vuepress.page.callouts) == 5
    assert "nl-callout-warn" in vuepress.page.callouts[0].split()
    assert "> 警告：📜 摘录\n>\n> 学而不思则罔，思而不学则殆。\n>\n> —— 出自某本书" in vuepress.text
    assert "> 详情：点击展开" in vuepress.text
    assert "> Note\n>\n> These numbers leave out" in docusaurus.text
    assert "> Tip: Try it\n>\n> Run proj up in any folder." in docusaurus.text
    assert "> Warning: Outer\n>\n> > Danger: Inner\n> >\n> > Nested one level down." in (
        docusaurus.text
    )


def test_admonitions_become_callouts_their_indented_body_and_all(
    weeklies: Weeklies,
) -> None:
    """MkDocs `!!! note "Title"` with an indented body (a link, a code block), `??? info`
    (collapsed on the site, open in an email), `???+ tip`, `!!! warning` with no title."""
    arrived = weeklies["mkdocs"]
    found = [(c.tone, title(c)) for c in callouts(arrived.issue)]
    assert found == [
        ("note", "Why a fork does not help"),
        ("info", "How to silence the warning"),
        ("tip", ""),
        ("warning", ""),
    ]
    note = callouts(arrived.issue)[0]
    assert [type(b) for b in note.blocks] == [Paragraph, CodeBlock]
    assert "https://catalog.example.org/plugins" in arrived.page.hrefs
    assert "export NO_WARNING=1" in arrived.page.code
    assert "> Info: How to silence the warning\n>\n> Set the variable before the build." in (
        arrived.text
    )
    assert "> Tip\n>\n> Shown open by default." in arrived.text
    assert "> Warning\n>\n> No title given." in arrived.text
    assert len(arrived.page.callouts) == 4


def test_a_highlight_pair_is_a_code_block_with_its_lines_and_indentation(
    weeklies: Weeklies,
) -> None:
    arrived = weeklies["jekyll"]
    code = 'enum Testing: String {\n    case thing = "thing"\n    case bob = {!@#$} // what\n}'
    blocks = [b for s in arrived.issue.sections for b in walk_blocks(s.intro)]
    [block] = [b for b in blocks if isinstance(b, CodeBlock)]
    assert (block.text, block.language) == (code, "swift")  # its blank ends gone, as on the site
    assert code in arrived.page.code
    assert "\n".join("    " + line for line in code.split("\n")) in arrived.text


def test_an_include_is_left_out_with_a_warning_naming_it_at_its_line(
    weeklies: Weeklies,
) -> None:
    arrived = weeklies["jekyll"]
    for include in ("{% include sponsor.html %}", "{% include task_remind.html %}"):
        [message] = arrived.at(arrived.line_of(include))
        assert include in message
        assert "left out" in message
    assert "sponsor.html" not in arrived.text + arrived.page.shown
    # A comment pair is the editor's: neither its tags nor its words reach a reader.
    assert "Remember the sponsor" not in arrived.text + arrived.page.shown


def test_a_site_expression_in_a_sentence_is_a_warning_not_braces(
    weeklies: Weeklies,
) -> None:
    arrived = weeklies["jekyll"]
    [message] = arrived.at(arrived.line_of("{{ site.swift_version }}"))
    assert "{{ site.swift_version }}" in message
    [message] = arrived.at(arrived.line_of("{{ site.url }}/archive/"))
    assert "'{{ site.url }}/archive/'" in message
    assert "[archive]" not in arrived.text  # its words, without the link, not Markdown


def test_url_filters_on_a_literal_path_resolve_against_base(
    weeklies: Weeklies,
) -> None:
    eleventy, jekyll = weeklies["eleventy"], weeklies["jekyll"]
    assert "https://engine.example.org/img/blog/2026-07-shell.png" in eleventy.page.srcs
    assert "https://engine.example.org/img/blog/2026-07-gc.png" in eleventy.page.srcs
    assert "https://engine.example.org/img/blog/2026-07-shell.png" in eleventy.page.hrefs
    assert "Sponsorship page (https://engine.example.org/sponsorship/)" in eleventy.text
    assert "tiers (https://engine.example.org/blog/2025/11/21/tiers/)" in eleventy.text
    assert "https://swiftbrief.example.org/proposals/0011/" in jekyll.page.hrefs
    assert eleventy.findings == [f for f in eleventy.findings if f.code == "list"]


def test_an_unknown_filter_is_a_finding_naming_the_tag_and_the_address(tmp_path: Path) -> None:
    arrived = arrive(
        copy_project(tmp_path / "project"),
        snippet(
            "A [slug]({{ '/b/' | slugify }}) link.\n\n"
            '<img src="{{ \'/i.png\' | prepend: site.baseurl }}" alt="a chart">\n'
        ),
    )
    [link] = arrived.at(6)
    assert "{{ '/b/' | slugify }}" in link
    [image] = arrived.at(8)
    assert "<img>" in image
    assert "{{ '/i.png' | prepend: site.baseurl }}" in image
    assert "slugify" not in arrived.text
    assert "prepend" not in arrived.page.shown


def check(project: Path, source: str) -> tuple[int, str]:
    """`newsletter check` on `source` as issue 77, as an editor runs it."""
    (project / "issues" / "77.md").write_text(source, encoding="utf-8")
    result = CliRunner().invoke(cli, ["check", "--issue", "77"])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("body", "tag"),
    [
        ('<img src="/img/x png.png" alt="a chart">\n', "<img>"),
        (
            '<figure>\n  <img src="/img/x png.png" alt="a chart">\n'
            "  <figcaption>Pauses</figcaption>\n</figure>\n",
            "<img>",
        ),
    ],
    ids=["img", "img-in-figure"],
)
def test_an_image_address_with_a_space_is_an_error_naming_the_tag_and_the_address(
    project: Path, body: str, tag: str
) -> None:
    code, output = check(project, snippet("Text first.\n\n" + body))
    assert code == 1, output
    [error] = [line for line in output.splitlines() if line.startswith("error:")]
    assert tag in error
    assert "'/img/x png.png'" in error
    assert "issues/77.md:" in error
    for pydantic in ("validation", "Tuple", "should", "intro:"):
        assert pydantic not in output


def test_a_figure_is_its_image_and_caption_with_no_field_error(project: Path) -> None:
    code, output = check(
        project,
        snippet(
            '<figure>\n  <img src="{{ \'/img/a.png\' | url }}" alt="a chart" width="600" '
            'height="300">\n  <figcaption>Fewer pauses</figcaption>\n</figure>\n'
        ),
    )
    assert code == 0, output
    assert "issue 77: 0 error(s)" in output
    assert "Tuple should have at least 1 item" not in output


def test_links_inside_code_arrive_as_links_in_both_parts(weeklies: Weeklies) -> None:
    arrived = weeklies["eleventy"]
    urls = [
        "https://doc.example.org/engine/struct.WebView.html",
        "https://doc.example.org/engine/struct.WebView.html#method.take_screenshot",
    ]
    assert arrived.page.code_links == urls  # links, their words still code
    assert f"WebView ({urls[0]})::take_screenshot ({urls[1]})" in arrived.text


def test_a_weekly_topped_by_h3_has_h3_sections_and_h4_items(
    weeklies: Weeklies, tmp_path: Path
) -> None:
    jekyll = weeklies["jekyll"]
    assert [str(s.title) for s in jekyll.issue.sections] == [
        "Commits and pull requests",
        "Proposals",
        "Finally",
    ]
    assert jekyll.errors == []
    arrived = arrive(
        copy_project(tmp_path / "project"),
        snippet(
            "### Releases\n\n#### [Tool 2.0](https://tool.example.org/2)\n\nFaster.\n\n"
            "#### [Lib 1.1](https://lib.example.org/1.1)\n\nSmaller.\n\n### Reading\n\n"
            "Two essays this week.\n"
        ),
    )
    assert arrived.errors == []
    assert [str(s.title) for s in arrived.issue.sections] == ["Releases", "Reading"]
    assert [i.url for i in arrived.issue.sections[0].items] == [
        "https://tool.example.org/2",
        "https://lib.example.org/1.1",
    ]


def test_words_about_templates_stay_as_written(tmp_path: Path) -> None:
    """Issue 30's weekly about templates: a Liquid tag that fills in nothing and an expression
    of no site's data, inside a sentence, are its words."""
    arrived = arrive(
        copy_project(tmp_path / "project"),
        snippet("Jinja writes {% for x in xs %}; Helm reads {{ .Values.tag }}; Vue {{ msg }}.\n"),
    )
    assert "Jinja writes {% for x in xs %}; Helm reads {{ .Values.tag }}; Vue {{ msg }}." in (
        arrived.text
    )
    assert arrived.at(6) == []


def test_a_colon_line_that_closes_no_container_is_noted(tmp_path: Path) -> None:
    arrived = arrive(
        copy_project(tmp_path / "project"),
        snippet(
            "::: warning Quote\nWords.\n::: right\nSomeone\n:::\n:::\n\n::: code-group\n"
            "```sh\npnpm add x\n```\n:::\n"
        ),
    )
    [message] = arrived.at(11)
    assert "':::' closes no container" in message
    assert ":::" not in arrived.text
    # VitePress' code group is tabs of code: the code, in no box.
    assert "pnpm add x" in arrived.page.code
    assert len(arrived.page.callouts) == 1


def test_jekyll_embed_tags_become_links_to_what_they_embed(tmp_path: Path) -> None:
    """Jekyll's embed plugins write `{% youtube ID %}`, `{% gist user/ID %}`, `{% twitter URL %}`:
    each a link to the page it embeds, on a line of its own or in a sentence, with nothing to
    say."""
    arrived = arrive(
        copy_project(tmp_path / "project"),
        snippet(
            "{% youtube GyZHySRUKXI %}\n\nSee {% gist swiftfolk/931c1c8d465a04042403 %} and "
            "{% twitter https://twitter.com/swiftlang/status/1 %}.\n\n{% vimeo 146022717 %}\n"
        ),
        ENGLISH,
    )
    assert "▶ video (https://www.youtube.com/watch?v=GyZHySRUKXI)" in arrived.text
    assert "gist 931c1c8d465a04042403 (https://gist.github.com/swiftfolk/931c1c8d465a04042403)" in (
        arrived.text
    )
    assert "post (https://twitter.com/swiftlang/status/1)" in arrived.text
    assert "https://vimeo.com/146022717" in arrived.page.hrefs
    assert [f for f in arrived.findings if f.line] == []
    for mark in SYNTAX:
        assert mark not in arrived.text, mark


def test_a_themes_notice_pair_is_a_callout(weeklies: Weeklies) -> None:
    """Hugo themes' `{{% notice warning "Title" %}}` … `{{% /notice %}}`: a callout, its body
    read as Markdown, neither tag shown nor noted."""
    arrived = weeklies["hugo"]
    [notice] = callouts(arrived.issue)
    assert (notice.tone, title(notice)) == ("warning", "Read this first")
    assert "> Warning: Read this first\n>\n> Back up the state before the upgrade" in arrived.text
    assert "https://ops.example.org/upgrade" in arrived.page.hrefs
    assert arrived.at(arrived.line_of("{{% notice")) == []
    assert arrived.at(arrived.line_of("{{% /notice")) == []
