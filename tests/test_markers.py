"""Text is text (issue 30, point 4): `{{`, `{%` and `{#` in an issue are shown as written, and
the markers check (markers.py) names only a template's own leftovers, at the template's line.

Through the command line, as an editor runs it: `check` and `build` on a weekly about Helm,
Jinja and Zola templates (tests/data/phones/33.md), and on templates that really leave their
code in front of readers."""

from __future__ import annotations

import email
import shutil
from email.header import decode_header, make_header
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli

PHONES = Path(__file__).resolve().parent / "data" / "phones"
# What issue 33 writes in its title, a heading, an item title, a paragraph and a code block.
TITLE = "Code: {{ .Values }} and {% raw %} in a weekly about templates"
WRITTEN = (
    TITLE,
    "Helm {{ .Values.replicas }} replicas",
    "The chart's {{ .Values.image.tag }} and {% raw %}",
    "Jinja writes {% for x in xs %} and {# a comment #}",
    '- name: {{ .Values.name }}\n          image: "{{ .Values.image.repository }}',
    "{% raw %}{{ not a template }}{% endraw %}\n{# a Jinja comment #}",
    "Sponsor {#sponsor1}",
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_markers_in_an_issue_are_shown_as_written_and_check_clean(project: Path) -> None:
    shutil.copy2(PHONES / "33.md", project / "issues" / "33.md")
    code, out, err = run("check", "--issue", "33")
    assert code == 0, out + err
    assert "[markers]" not in out + err
    code, _, err = run("build", "--issue", "33", "--out", "dist")
    assert code == 0, err
    html = (project / "dist" / "email.html").read_text(encoding="utf-8")
    text = (project / "dist" / "email.txt").read_text(encoding="utf-8")
    message = email.message_from_bytes((project / "dist" / "email.eml").read_bytes())
    assert str(make_header(decode_header(message["Subject"]))) == TITLE
    for written in WRITTEN:
        assert written in html
        # The text part indents code by four spaces: each line as written after that.
        assert written.replace("\n", "\n    ") in text or written in text


def insert_line(path: Path, before: str, line: str) -> int:
    """Put `line` in the template at `path` above the first line holding `before`; its number."""
    lines = path.read_text(encoding="utf-8").split("\n")
    index = next(i for i, text in enumerate(lines) if before in text)
    lines.insert(index, line)
    path.write_text("\n".join(lines), encoding="utf-8")
    return index + 1


@pytest.mark.parametrize(
    ("template", "before", "line", "says"),
    [
        (
            "issue.mjml",
            '<p class="nl-greeting">',
            "<p>{% raw %}Hi {{ subscriber.name }}{% endraw %}</p>",
            "the template's own text has '{{', which every reader would see as written",
        ),
        (
            "content.txt",
            "{%- macro block_text(b) -%}",
            '{{ "{#" }} a note left in',
            "the template's own text has '{#', which every reader would see as written",
        ),
        (
            "issue.mjml",
            '<p class="nl-greeting">',
            "<mj-textt>Hello</mj-textt>",
            "the HTML part still contains '<mj-textt': MJML has no such tag",
        ),
    ],
    ids=["raw-block", "printed-string", "mjml-tag"],
)
@pytest.mark.slow
def test_a_templates_own_leftover_is_an_error_at_its_line(
    project: Path, template: str, before: str, line: str, says: str
) -> None:
    path = project / "templates" / "email" / template
    number = insert_line(path, before, line)
    code, out, err = run("check", "--issue", "14")
    assert code == 1, out + err
    found = [f for f in out.splitlines() if f.endswith("[markers]")]
    assert len(found) == 1, out + err
    assert found[0].startswith(f"error: templates/email/{template}:{number}: {says}")
    assert "remove it, or write the text it was meant to show" in found[0]
