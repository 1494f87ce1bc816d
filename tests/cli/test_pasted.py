"""A weekly pasted as it is (issue 30, the Markdown side): `newsletter check` and `build` on a
project copy, each finding at its line, and what the pasted source holds in both parts."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.images import picture

HEAD = "---\nnumber: {number}\ntitle: Pasted {number}\n{extra}---\n"


def paste(project: Path, number: int, body: str, extra: str = "") -> Path:
    path = project / "issues" / f"{number}.md"
    path.write_text(HEAD.format(number=number, extra=extra) + body, encoding="utf-8")
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


class _Attributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.images: list[tuple[str, str]] = []  # (src, alt)
        self.centred: list[str] = []
        self.words: list[str] = []  # every text the page shows, in order
        self._centring = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "a":
            self.hrefs.append(values.get("href", ""))
        elif tag == "img":
            self.images.append((values.get("src", ""), values.get("alt", "")))
        self._centring = tag == "p" and "text-align:center" in values.get("style", "")

    def handle_data(self, data: str) -> None:
        self.words.append(data)
        if self._centring and data.strip():
            self.centred.append(data.strip())


def built(number: int) -> tuple[str, str, _Attributes]:
    """`build` the issue: its HTML part, text part, and the HTML's links and images."""
    code, _, err = run("build", "--issue", str(number), "--out", f"out{number}")
    assert code == 0, err
    page = Path(f"out{number}/email.html").read_text(encoding="utf-8")
    text = Path(f"out{number}/email.txt").read_text(encoding="utf-8")
    found = _Attributes()
    found.feed(page)
    return page, text, found


def flat(value: str) -> str:
    return "".join(html.unescape(value).split())


@pytest.mark.slow
def test_inline_html_is_an_image_a_link_a_player_not_a_loss(project: Path) -> None:
    # issue 30: `<img>`, `<a>` and `<video>` in a paragraph were dropped with only a warning.
    paste(
        project,
        30,
        "## News\n\n"
        'Before <img src="https://img.example.org/a.png" alt="A cat" width=800 height=400 /> '
        'after, a <a href="https://e.org/licence">licence</a>, <kbd>Ctrl</kbd>+<kbd>C</kbd>, '
        "H<sub>2</sub>O.\n\n"
        '<video controls src="https://media.example.org/v.mp4" title="The demo"></video>\n\n'
        '<iframe src="https://www.youtube.com/embed/abc123" title="The talk"></iframe>\n\n'
        "<script>track()</script>\n\n"
        "Words around <Support /> stay.\n",
    )
    code, out, err = run("check", "--issue", "30")
    assert code == 0, out + err
    assert "issues/30.md:13: HTML <script> is left out of the email" in out
    assert "issues/30.md:15: an MDX component <Support /> is left out of the email" in out
    assert "error:" not in out
    page, text, found = built(30)
    assert ("https://img.example.org/a.png", "A cat") in found.images
    assert 'width="544"' in page or 'width="800"' in page  # its size, capped at the column
    for url in ("https://e.org/licence", "https://media.example.org/v.mp4"):
        assert url in found.hrefs
        assert url in text
    assert "https://www.youtube.com/watch?v=abc123" in found.hrefs
    assert "▶ The demo (https://media.example.org/v.mp4)" in text
    assert "▶ The talk (https://www.youtube.com/watch?v=abc123)" in text
    assert page.count(">Ctrl</code>") == 1
    assert "Ctrl+C, H2O." in "".join(found.words)
    assert "Ctrl+C, H2O." in text
    assert "Words around stay." in " ".join(text.split())
    assert "track()" not in page + text


@pytest.mark.slow
def test_html_blocks_and_tables_are_blocks_of_the_email(project: Path) -> None:
    # issue 30: `<p align="center">`, `<h3 id=…>`, `<details>` and tables were refused.
    paste(
        project,
        31,
        "## Digest\n\n"
        '<p align="center">\n'
        "  <img src='https://img.example.org/logo.png' style=\"max-width:30%;\"></img><br>\n"
        "Follow us for the next issue\n"
        "</p>\n\n"
        '<h3 id="tools">Tools of the week</h3>\n\n'
        "<details><summary>How we pick</summary>\n\nBy votes.\n\n</details>\n\n"
        "| Tool | Stars |\n|---|---|\n| [ripgrep](https://e.org/rg) | 40k |\n\n"
        "<table><tr><th>Name</th><th>Use</th></tr>"
        '<tr><td><a href="https://e.org/fd">fd</a></td><td>find files</td></tr></table>\n',
    )
    code, out, err = run("check", "--issue", "31")
    assert code == 0, out + err
    assert "error:" not in out
    page, text, found = built(31)
    assert found.centred == ["Follow us for the next issue"]
    # The line under the logo is its caption: its alt text too.
    assert ("https://img.example.org/logo.png", "Follow us for the next issue") in found.images
    assert ">Tools of the week</h" in page
    assert "How we pick" in text
    assert "By votes." in text
    assert page.count('<div class="nl-table"') == 2
    assert "Tool | Stars\nripgrep (https://e.org/rg) | 40k" in text
    assert "Name | Use\nfd (https://e.org/fd) | find files" in text
    assert {"https://e.org/rg", "https://e.org/fd"} <= set(found.hrefs)


@pytest.mark.slow
def test_an_image_without_alt_text_is_a_warning_with_the_count(project: Path) -> None:
    # issue 30: `![](…)` (in most pasted weeklies) refused the whole build.
    body = (
        "## Cover\n\n"
        "![](https://img.example.org/1.png)\n\n"
        "![](https://img.example.org/2.png)\n"
        "*The harbour at dawn*\n\n"
        "![](https://img.example.org/3.png)\n\n"
        "A long paragraph after the third image, with [a link](https://e.org/x), is no caption.\n"
    )
    paste(project, 32, body)
    code, out, err = run("check", "--issue", "32")
    assert code == 0, out + err
    assert (
        "warning: issues/32.md:7: 2 images have (lines 7, 12) no alt text, so a screen reader "
        "says nothing of it" in out
    )
    _, text, found = built(32)
    assert ("https://img.example.org/2.png", "The harbour at dawn") in found.images
    assert ("https://img.example.org/1.png", "") in found.images
    assert "The harbour at dawn" in text
    # An editor who wants every image described keeps the error.
    with (project / "newsletter.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[check]\nalt_text = "error"\n')
    code, out, _ = run("check", "--issue", "32")
    assert code == 1
    assert "error: issues/32.md:7: 2 images have (lines 7, 12) no alt text" in out


@pytest.mark.slow
def test_relative_links_and_images_resolve_against_base(project: Path) -> None:
    # issue 30: `./img.png`, `imgs/x.png` and `../293/` were errors in a pasted weekly.
    paste(
        project,
        33,
        "## Links\n\n"
        "![A chart](./imgs/chart.png) and [last week](../293/), [top](#top).\n\n"
        '<img src="imgs/b.png" alt="B"> <a href="/about">about</a>\n\n'
        "The [rules](@/rules.md) stay as words.\n",
        extra="base: https://weekly.example.org/294/\n",
    )
    code, out, err = run("check", "--issue", "33")
    assert code == 0, out + err
    assert "warning: issues/33.md:12: the internal link '@/rules.md' names a page" in out
    _, text, found = built(33)
    for src in (
        "https://weekly.example.org/294/imgs/chart.png",
        "https://weekly.example.org/294/imgs/b.png",
    ):
        assert src in [s for s, _ in found.images]
        assert src in text
    for href in (
        "https://weekly.example.org/293/",
        "https://weekly.example.org/294/#top",
        "https://weekly.example.org/about",
    ):
        assert href in found.hrefs
        assert href in text
    assert "The rules stay as words." in text


@pytest.mark.slow
def test_without_base_local_images_work_and_relative_links_are_words(project: Path) -> None:
    (project / "issues" / "imgs").mkdir()
    (project / "issues" / "imgs" / "chart.png").write_bytes(picture(600, 300, seed=1))
    paste(project, 34, "## Links\n\n![A chart](./imgs/chart.png)\n\nSee [last week](../293/).\n")
    code, out, err = run("check", "--issue", "34")
    assert code == 0, out + err
    assert "warning: issues/34.md:9: the link to '../293/' is relative" in out
    _, text, found = built(34)
    assert ("https://news.example.org/issues/imgs/chart.png", "A chart") in found.images
    assert "See last week." in text


def test_check_rejects_a_base_that_is_no_address(project: Path) -> None:
    paste(project, 35, "## A\n\nText.\n", extra="base: weekly/294\n")
    code, out, err = run("check", "--issue", "35")
    assert code == 1
    assert "issues/35.md:4: base: must be the https:// address" in err + out
    assert "Traceback" not in err + out


@pytest.mark.slow
def test_the_smaller_rules_of_a_pasted_weekly(project: Path) -> None:
    paste(
        project,
        36,
        "# This week\n\n"  # a section: the front matter has the title
        "Intro words.\n\n"
        "---\n\n"  # a divider, no empty section
        "## Links\n\n"
        "Our picks, first a sentence.\n\n"
        "- [One](https://e.org/1) first\n"
        "- [Two](https://e.org/2) second\n\n"
        "## Projects\n\n"
        "### 0、C 项目\n\nText.\n\n### 1、86Box\n\nMore.\n\n"
        "## Proxy\n\n"
        "GOPROXY=https://goproxy.cn,direct; see https://e.org/go; or https://e.org/x!\n"
        "Done\n"
        "---\n",
    )
    code, out, err = run("check", "--issue", "36")
    assert code == 0, out + err
    assert 'warning: issues/36.md:20: 2 titles carry their own numbers ("0、C 项目")' in out
    _, text, found = built(36)
    # The first # heading is a section; `---` a divider, never a section of its own.
    assert "\n1. This week\n" not in text
    assert text.count("========================") == 4
    assert "This week\n====" in text
    assert "Done\n\n------------------------" in text
    # A list after a section's own words stays a bullet list, not numbered items.
    assert "- One (https://e.org/1) first\n- Two (https://e.org/2) second" in text
    # Titles with their own numbers are not numbered again.
    assert "0、C 项目" in text
    assert "0、0、C 项目" not in text
    # A bare URL ends before , and ; and the text part keeps it apart from a following "!".
    assert "https://goproxy.cn" in found.hrefs
    assert "https://e.org/go" in found.hrefs
    assert "https://e.org/x" in found.hrefs
    assert (
        "GOPROXY=<https://goproxy.cn>,direct; see <https://e.org/go>; or <https://e.org/x>!" in text
    )
    assert "GOPROXY=https://goproxy.cn,direct; see" in "".join(found.words)


@pytest.mark.slow
def test_an_image_at_the_site_root_without_base_is_one_clear_error(project: Path) -> None:
    # A React weekly's `![](/emails/issues/209/expo.jpg)`: two errors that named no fix.
    body = "## A\n\n![Expo](/emails/issues/209/expo.jpg)\n\n<img src='/emails/x.png' alt=x>\n"
    paste(project, 37, body)
    code, out, err = run("check", "--issue", "37")
    assert code == 1
    found = [line for line in (out + err).splitlines() if "issues/37.md" in line]
    assert [line.split(": the image ")[0].removeprefix("error: ") for line in found] == [
        "issues/37.md:7",
        "issues/37.md:9",
    ]
    assert "add the issue page's address to the front matter (base: https://" in found[0]
    paste(project, 37, body, extra="base: https://react.example.org/newsletter/209/\n")
    code, out, err = run("check", "--issue", "37")
    assert code == 0, out + err
    _, text, found_page = built(37)
    assert "https://react.example.org/emails/issues/209/expo.jpg" in text
    assert ("https://react.example.org/emails/x.png", "x") in found_page.images


@pytest.mark.slow
def test_titles_that_start_with_a_version_keep_the_numbering(project: Path) -> None:
    paste(project, 38, "## Releases\n\n### 1.0 is out\n\nA.\n\n### 2.1 is out\n\nB.\n")
    code, out, err = run("check", "--issue", "38")
    assert code == 0, out + err
    assert "[numbering]" not in out
    _, text, _ = built(38)
    assert "0、1.0 is out" in text  # the newsletter's own numbering (Chinese, from 0)


@pytest.mark.slow
def test_a_player_in_a_paragraph_links_to_its_source_tag_or_poster(project: Path) -> None:
    # issue 30: a <video> whose <source src=…> is a tag of its own (each one a token in a
    # paragraph) was left out as "a player without a source".
    paste(
        project,
        39,
        "## Demo\n\n"
        'Watch <video controls><source src="https://media.example.org/d.webm" type="video/webm">'
        "Your browser cannot play it</video> before the talk.\n\n"
        'And <audio controls title="The podcast">\n<source src="https://media.example.org/p.mp3">'
        "\n</audio> too.\n\n"
        'Or <video controls poster="https://img.example.org/still.png"></video> here.\n',
    )
    code, out, err = run("check", "--issue", "39")
    assert code == 0, out + err
    assert "player without a source" not in out
    page, text, found = built(39)
    for url in (
        "https://media.example.org/d.webm",
        "https://media.example.org/p.mp3",
        "https://img.example.org/still.png",
    ):
        assert url in found.hrefs
    assert "Watch ▶ video (https://media.example.org/d.webm) before the talk." in text
    assert "▶ The podcast (https://media.example.org/p.mp3)" in text
    assert "cannot play it" not in page + text


@pytest.mark.slow
def test_markdown_inside_a_centring_div_is_centred(project: Path) -> None:
    # issue 30: `<div align=center>`, Markdown, `</div>` kept the words but not the centring:
    # each is an HTML block of its own, and the Markdown between was read as any other.
    paste(
        project,
        40,
        "## Thanks\n\n"
        "<div align=center>\n\n"
        "Made with care by the team\n\n"
        "See you next week\n\n"
        "</div>\n\n"
        "Written on the left.\n\n"
        '<p align="center">Sponsor\n\n'  # a <p> left open ends at the next paragraph
        "Also on the left.\n",
    )
    code, out, err = run("check", "--issue", "40")
    assert code == 0, out + err
    _, text, found = built(40)
    assert found.centred == ["Made with care by the team", "See you next week", "Sponsor"]
    assert "Written on the left." in "".join(found.words)
    assert "See you next week" in text


@pytest.mark.slow
def test_a_project_template_without_a_table_branch_is_warned_at_the_table(
    project: Path,
) -> None:
    # issue 30: a project's own content.mjml, copied before tables existed, rendered a table
    # as nothing, and `check` said nothing.
    paste(
        project,
        41,
        "## Tools\n\nThe list:\n\n| Tool | Stars |\n|---|---|\n| ripgrep | 40k |\n\n"
        "<table><tr><td>fd</td></tr></table>\n",
    )
    code, out, err = run("check", "--issue", "41")
    assert code == 0, out + err
    assert "no branch for" not in out  # the shipped templates handle every kind
    template = project / "templates" / "email" / "content.mjml"
    source = template.read_text(encoding="utf-8")
    branch = '{%- elif b.kind == "table" -%}\n{{- table_html(b, level) -}}\n'
    assert branch in source
    template.write_text(source.replace(branch, ""), encoding="utf-8")
    code, out, err = run("check", "--issue", "41")
    assert code == 0, out + err
    assert (
        "warning: issues/41.md:9: this table is left out of the HTML part: the project's own "
        "templates/email/content.mjml has no branch for 'table' blocks"
    ) in " ".join(out.split())
    assert out.count("no branch for") == 1  # at the first table; the text part has its branch
    assert "delete the copy to use the shipped one" in " ".join(out.split())


@pytest.mark.slow
def test_footnotes_are_superscript_numbers_and_a_notes_list(project: Path) -> None:
    # issue 30: `[^s3]` and `[^s3]: text` were shown as they are written.
    paste(
        project,
        42,
        "## Reading\n\n"
        "Rust 2024 is out[^s3], and Go too[^go].\n\n"
        "### An item\n\nAgain[^s3], and a talk[^talk].\n\n"
        "[^s3]: The *release* notes.\n"
        "[^go]: https://go.dev/doc/go1.24\n\n"
        "[^talk]: https://e.org/talk\n",  # one address alone: a link definition to CommonMark
    )
    code, out, err = run("check", "--issue", "42")
    assert code == 0, out + err
    assert "[^" not in out
    page, text, found = built(42)
    words = "".join(found.words)
    assert "Rust 2024 is out¹, and Go too²." in words
    assert "Again¹, and a talk³." in words
    assert "Notes" in words
    assert "https://go.dev/doc/go1.24" in found.hrefs
    assert "[^" not in page + text
    assert "Rust 2024 is out¹, and Go too²." in text
    assert "https://e.org/talk" in found.hrefs
    notes = text[text.index("Notes") :]
    assert "1. The release notes.\n2. https://go.dev/doc/go1.24" in notes
    assert "3. https://e.org/talk" in notes


@pytest.mark.slow
def test_a_footnote_without_its_definition_is_a_warning_at_its_line(project: Path) -> None:
    paste(project, 43, "## Reading\n\nSee the source[^gone].\n")
    code, out, _ = run("check", "--issue", "43")
    assert code == 0
    assert "issues/43.md:7: the footnote [^gone] has no definition" in " ".join(out.split())


@pytest.mark.slow
def test_a_yaml_fields_footnotes_are_noted_at_the_fields_end(project: Path) -> None:
    # issue 30: a YAML issue's Markdown fields read footnotes too; their notes close the field.
    (project / "issues" / "44.yaml").write_text(
        "number: 44\ntitle: Yaml 44\nsections:\n  - title: Reading\n    items:\n"
        "      - title: Rust\n        url: https://e.org/rust\n"
        "        summary: |\n          It is out[^a].\n\n          [^a]: Since Thursday.\n",
        encoding="utf-8",
    )
    code, out, err = run("check", "--issue", "44")
    assert code == 0, out + err
    _, text, found = built(44)
    assert "It is out¹." in "".join(found.words)
    assert "1. Since Thursday." in text
    assert "[^a]" not in text


@pytest.mark.slow
def test_an_inline_script_goes_with_its_code_and_a_warning_the_words_around_stay(
    project: Path,
) -> None:
    # issue 30: a script (or a form) in a paragraph is left out with its content: its code
    # reached readers as words ("Before alert(1) after.").
    paste(
        project,
        44,
        "## Reading\n\nBefore <script>alert('x')</script> after, "
        "<form>a field</form> and the end.\n",
    )
    code, out, _ = run("check", "--issue", "44")
    assert code == 0
    lines = " ".join(out.split())
    assert "issues/44.md:7: inline HTML <script> is left out of the email" in lines
    assert "issues/44.md:7: inline HTML <form> is left out of the email" in lines
    page, text, _ = built(44)
    for part in (page, text):
        assert "alert" not in part
        assert "a field" not in part
    assert "Before after, and the end." in " ".join(text.split())
