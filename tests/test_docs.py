"""The documentation and the code in step: README and the site's pages (docs/, built by MkDocs)
name only commands and options that exist and every command somewhere; the configuration and
CLI references are the generator's output for today's code; every page is in the site's nav."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import click
import lxml.html
import pytest

from newsletter.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = set(cli.list_commands(click.Context(cli)))


def load_tool(name: str) -> ModuleType:
    """A script of tools/ (the reference generator, the site's nav hook) as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


DOCSREF = load_tool("docsref")
GENERATED = set(DOCSREF.pages())
# What people wrote: README and every page of the site but the generated references. A command
# or option counts as documented only here (the CLI reference names them all by construction).
WRITTEN = {
    path: path.read_text(encoding="utf-8")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if path not in GENERATED
}
DOCS = "\n".join(WRITTEN.values())


def code_lines(text: str) -> Iterator[str]:
    """The lines inside a page's fenced code blocks."""
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            yield line


def test_every_command_the_docs_name_exists() -> None:
    named = set(re.findall(r"`newsletter ([a-z]+)\b", DOCS))
    for text in WRITTEN.values():
        for line in code_lines(text):
            named |= set(re.findall(r"^newsletter ([a-z]+)\b", line))
    assert named, "the docs name no commands"
    assert named <= COMMANDS, f"the docs name commands that do not exist: {named - COMMANDS}"


def test_every_command_is_documented() -> None:
    missing = {name for name in COMMANDS if f"newsletter {name}" not in DOCS}
    assert not missing, f"commands no page of README or docs/ mentions: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_the_docs_give_a_command_exists(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    for usage in re.findall(rf"newsletter {name}\b([^`\n]*)", DOCS):
        chosen = command
        words = usage.split()
        if isinstance(command, click.Group) and words:  # `newsletter subscribers import ...`
            chosen = command.get_command(click.Context(command), words[0]) or command
        known = {opt for param in chosen.params for opt in getattr(param, "opts", [])}
        known |= {"--help"}
        for option in re.findall(r"(--[a-z][a-z-]*)", usage):
            assert option in known, f"the docs give `newsletter {name} {option}`, which it lacks"


def test_the_two_commands_and_the_ci_entry_point() -> None:
    assert "make demo" in README
    assert "make test" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().endswith("make test")


def test_make_test_builds_the_site_strictly() -> None:
    """`make test` depends on `docs`, which checks the references and builds with --strict."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test: .*\bdocs\b", makefile, re.MULTILINE)
    docs = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "tools/docsref.py --check" in docs
    assert "mkdocs build --strict" in docs
    # No plugin that fetches fonts or assets at build time: the build works offline.
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "plugins:" not in config or not re.search(r"-\s*(privacy|social)\b", config)


def test_help_lists_every_command() -> None:
    text = cli.get_help(click.Context(cli, info_name="newsletter"))
    for name in COMMANDS:
        assert f"  {name} " in text


def test_readme_is_one_page_for_a_newcomer_and_its_links_resolve() -> None:
    assert len(README.splitlines()) < 300
    linked = re.findall(r"\]\(([^)#\s]+)", README)
    local = [link for link in linked if not link.startswith(("http://", "https://"))]
    assert [link for link in local if not (ROOT / link).exists()] == []
    # It sends the reader on to the site: its start, both references and the deployment page.
    for page in ("guide/getting-started.md", "reference/config.md", "reference/cli.md"):
        assert f"docs/{page}" in local
    assert "docs/guide/production.md" in local


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists (read as text: the file holds a !!python tag)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1]
    return re.findall(r":\s+(\S+\.md)\s*$", nav, re.MULTILINE)


HOOKS = load_tool("mkdocs_hooks")


def test_every_page_is_in_the_nav() -> None:
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    listed = nav_pages()
    # The guide pages of other work join the nav through the hook when their file exists.
    listed += [page for page in HOOKS.OPTIONAL if (ROOT / "docs" / page).is_file()]
    assert sorted(pages - set(listed)) == [], "pages the site's nav does not list"
    assert [page for page in listed if page not in pages] == []
    assert "layout.md" in listed  # tests/test_layout.py reads it at docs/layout.md


def test_a_guide_page_of_other_work_joins_its_section_when_present(tmp_path: Path) -> None:
    nav = [{"Home": "index.md"}, {"Readers and privacy": [{"Lists": "guide/lists.md"}]}]
    assert HOOKS.add_present_pages(nav, tmp_path) == nav  # absent: the nav as it was
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "sequences.md").write_text("# Sequences\n", encoding="utf-8")
    assert HOOKS.add_present_pages(nav, tmp_path)[1] == {
        "Readers and privacy": [{"Lists": "guide/lists.md"}, {"Sequences": "guide/sequences.md"}]
    }
    # Listed already (the lead wrote it into mkdocs.yml): not twice.
    assert HOOKS.add_present_pages(nav, tmp_path)[1]["Readers and privacy"][-1] == {
        "Sequences": "guide/sequences.md"
    }
    assert len(nav[1]["Readers and privacy"]) == 2
    assert "hooks:\n  - tools/mkdocs_hooks.py" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_reference_pages_are_the_code_s() -> None:
    """A new option or key, or a changed default or help, and the committed page is stale."""
    for path, text in DOCSREF.pages().items():
        committed = path.read_text(encoding="utf-8") if path.exists() else ""
        assert committed == text, f"{path.name} is stale: run `python tools/docsref.py`"


def test_every_setting_has_help() -> None:
    assert DOCSREF.missing_help() == []


def test_the_config_reference_lists_every_table_and_key() -> None:
    page = DOCSREF.config_reference()
    for header, model, _ in DOCSREF.tables():
        section = page.split(f"## `[{header}]`\n", 1)[1].split("\n## ", 1)[0]
        for key in model.model_fields:
            assert f"| `{key}` |" in section, f"[{header}] {key}"
    assert "| `NEWSLETTER_SECRET` |" in page
    assert "| `NEWSLETTER_SMTP_PASSWORD` |" in page


def commands(group: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """Every command under `group`, with the words that run it."""
    yield path, group
    if isinstance(group, click.Group):
        for name in group.list_commands(click.Context(group)):
            child = group.get_command(click.Context(group), name)
            assert child is not None
            yield from commands(child, f"{path} {name}")


def test_the_cli_reference_lists_every_command_and_option() -> None:
    page = DOCSREF.cli_reference()
    for path, command in commands(cli, "newsletter"):
        heading = re.search(rf"^#+ `{path}`\n", page, re.MULTILINE)
        assert heading, path
        section = re.split(r"\n#+ `", page[heading.end() :], maxsplit=1)[0]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts:
                    assert opt in section, f"{path} {opt}"


def test_the_help_of_a_key_is_its_comment_in_the_model(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text(
        "class Table:\n"
        "    # Above the key,\n"
        "    # on two lines.\n"
        "    first: int = 1  # and beside it\n"
        "    second: int = 2\n",
        encoding="utf-8",
    )
    assert DOCSREF.source_comments(source) == {
        ("Table", "first"): "Above the key, on two lines. and beside it"
    }


def test_no_two_keys_of_a_table_share_one_description() -> None:
    """Issue 41: `greeting_fallback`, `sample_name` and `sample_email` all read "The line above
    each issue's intro ... greeting = "auto" The greeting's word ...": one comment over three
    keys (and a commented-out key's) in the config init writes. Each key says what it is."""
    page = DOCSREF.config_reference()
    for header, _model, _ in DOCSREF.tables():
        section = page.split(f"## `[{header}]`\n", 1)[1].split("\n## ", 1)[0]
        rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
        helps = [row[-1] for row in rows]
        shared = {h for h in helps if helps.count(h) > 1}
        assert not shared, f"[{header}]: {sorted(r[0] for r in rows if r[-1] in shared)}"
    assert '| `sample_email` | string | `"reader@example.org"` | The sample reader\'s' in page


def test_a_key_shown_commented_out_ends_the_comment_above_it(tmp_path: Path) -> None:
    config = tmp_path / "newsletter.toml"
    config.write_text(
        "[newsletter]\n"
        "# The greeting line.\n"
        '# greeting = "auto"\n'
        "# The fallback name.\n"
        "greeting_fallback = $greeting_toml\n"
        "sample_name = $sample_toml\n",
        encoding="utf-8",
    )
    assert DOCSREF.template_comments(config) == {
        ("newsletter", "greeting"): "The greeting line.",
        ("newsletter", "greeting_fallback"): "The fallback name.",
        # A comment speaks for the keys right under it too.
        ("newsletter", "sample_name"): "The fallback name.",
    }


def test_every_exit_code_of_send_is_documented() -> None:
    command = cli.get_command(click.Context(cli), "send")
    assert command is not None
    assert command.help
    listed = command.help.split("Exit codes:", 1)[1]
    codes = set(re.findall(r"^\s+(\d)\s", listed, re.MULTILINE))
    assert codes == {"0", "1", "3", "4"}
    errors = (ROOT / "docs" / "guide" / "errors.md").read_text(encoding="utf-8")
    assert {code for code in codes if f"\n| {code} |" not in errors} == set()


@pytest.mark.slow
def test_the_api_page_s_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/api.md's Python blocks, in order, in an empty folder: what the page says works."""
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("NEWSLETTER_")]:
        monkeypatch.delenv(name)
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), scope)  # noqa: S102 - the page's own code
    assert (tmp_path / "issue-1.html").read_text(encoding="utf-8").startswith("<!")
    assert scope["draft"].errors == 0  # type: ignore[attr-defined]


@pytest.mark.slow
def test_make_docs_site_keeps_a_site_to_open(tmp_path: Path) -> None:
    # issue 41: `make docs` built into a folder it deleted, leaving nothing to open.
    site = tmp_path / "site"
    done = subprocess.run(
        ["make", "--no-print-directory", "docs-site", f"SITE={site}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"The manual is in {site}/: open {site}/index.html" in done.stdout
    index = lxml.html.fromstring((site / "index.html").read_text(encoding="utf-8"))
    hrefs = {a.get("href") for a in index.iter("a")}
    assert any(h and h.startswith("guide/signup") for h in hrefs), hrefs
    assert (site / "guide" / "signup" / "index.html").is_file()
    development = (ROOT / "docs" / "guide" / "development.md").read_text(encoding="utf-8")
    assert "make docs-site" in development
    assert "make docs-serve" in development


def test_readme_starts_a_newsletter_in_one_install_line_init_mailbox_and_a_test_send() -> None:
    section = README.split("## Start your own newsletter\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == [
        "pipx install git-newsletter",  # the distribution's name; the command is `newsletter`
        "newsletter init mynews --yes && cd mynews",
        "newsletter mailbox &",
        "newsletter send --issue 1 --list staging",
    ]
    words = " ".join(section.split())
    assert 'If pipx ends with "not on your PATH", run `pipx ensurepath`' in words
    assert "`newsletter serve --local`" in words
