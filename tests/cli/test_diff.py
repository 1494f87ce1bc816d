"""`newsletter diff --issue N [REV] [REV]` (issue 33, point 1): an issue at two git revisions as
its readers get it, on a repository made by `newsletter init`: the text part's diff names the
changed word, the link list the changed link and its item, the subject, size and findings lines
are there, the working tree is the default second side, a template-only change shows, and each
way it cannot run is one line and exit 1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.rendering.render import DEFAULT_TEMPLATE_DIRS
from support.gitrepo import git
from support.images import png

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def diff(root: Path, *args: str, **invoke: Any) -> Any:
    config = str(root / "newsletter.toml")
    return CliRunner().invoke(cli, ["--config", config, "diff", "--issue", "1", *args], **invoke)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project made by init, committed once (no templates folder: the package's are used)."""
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def one_word_and_one_link(root: Path) -> None:
    issue = root / "issues" / "1.md"
    edit(issue, "Welcome to the first issue", "Greetings from the first issue")
    edit(issue, "(https://example.org/another)", "(https://example.org/elsewhere)")


def test_two_commits_one_word_and_one_link(repo: Path) -> None:
    one_word_and_one_link(repo)
    git(repo, "commit", "-q", "-am", "one word, one link")
    result = diff(repo, "HEAD~1", "HEAD")
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert re.fullmatch(r"issue 1: HEAD~1 \([0-9a-f]{7}\) -> HEAD \([0-9a-f]{7}\)", out[0])
    assert "subject: My Newsletter 1 (unchanged)" in out
    assert "preheader: The first issue of My Newsletter. (unchanged)" in out
    size = next(line for line in out if line.startswith("size: "))
    assert size.count("of Gmail's ~102 KB clip") == 2, size  # before and after: bytes differ
    assert "findings: 0 errors, 0 warnings -> 0 errors, 0 warnings" in out
    assert "links: 1 changed, 0 added, 0 removed" in out
    # The link by the item it stands in, the old address and the new.
    assert "  ~ [Another link] https://example.org/another -> https://example.org/elsewhere" in out
    removed = [line for line in out if line.startswith("-") and not line.startswith("---")]
    added = [line for line in out if line.startswith("+") and not line.startswith("+++")]
    assert any("Welcome to the first issue" in line for line in removed), out
    assert any("Greetings from the first issue" in line for line in added), out
    assert "-https://example.org/another" in removed
    assert "+https://example.org/elsewhere" in added
    assert out[-1].startswith("pictures: ")  # how to get them, or --html (tests/review/)


def test_a_links_row_names_its_item(repo: Path) -> None:
    # Two links: the first is also the title's, the row shows both (one alone would only
    # repeat the title's, and the row would not be shown).
    links = [
        {"label": "Paper", "url": "https://example.org/paper"},
        {"label": "Code", "url": "https://example.org/code"},
    ]
    rows = {"title": "A tool", "links": links}
    issue = {"number": 2, "title": "Two", "sections": [{"title": "Tools", "items": [rows]}]}
    path = repo / "issues" / "2.yaml"
    path.write_text(yaml.safe_dump(issue), encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "issue 2")
    edit(path, "https://example.org/code", "https://example.org/source")
    config = str(repo / "newsletter.toml")
    result = CliRunner().invoke(cli, ["--config", config, "diff", "--issue", "2"])
    assert result.exit_code == 0, result.output
    assert "  ~ [A tool: Code] https://example.org/code -> https://example.org/source" in (
        result.stdout.splitlines()
    )


def test_the_working_tree_against_the_last_commit_by_default(repo: Path) -> None:
    one_word_and_one_link(repo)  # not committed
    result = diff(repo)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert re.fullmatch(r"issue 1: HEAD \([0-9a-f]{7}\) -> working tree", out[0])
    assert "+++ working tree: issue 1, text part" in out
    assert any(line.startswith("+") and "Greetings" in line for line in out), out
    # The last commit is read from git, not from the edited file.
    assert any(line.startswith("-") and "Welcome to the first" in line for line in out), out
    git(repo, "commit", "-q", "-am", "edited")
    result = diff(repo)
    assert "text part: unchanged" in result.stdout
    assert "links: 0 changed, 0 added, 0 removed" in result.stdout


def test_a_template_only_change_shows_in_the_text_part(repo: Path) -> None:
    templates = repo / "templates" / "email"
    templates.mkdir(parents=True)
    shipped = next(d for d in DEFAULT_TEMPLATE_DIRS if (d / "issue.txt").is_file())
    text = (shipped / "issue.txt").read_text(encoding="utf-8")
    assert "{{ text.greeting }}" in text, "the shipped issue.txt no longer greets"
    (templates / "issue.txt").write_text(
        text.replace("{{ text.greeting }}", "{{ text.greeting }} Fresh from our template."),
        encoding="utf-8",
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "our own text template")
    # The first commit has no templates folder: the package's own render it.
    result = diff(repo, "HEAD~1", "HEAD")
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert any(line.startswith("+") and "Fresh from our template." in line for line in out), out
    assert not any(line.startswith("-") and "Fresh from" in line for line in out), out
    assert "links: 0 changed, 0 added, 0 removed" in out
    # Each revision renders with its own templates: the template removed from the work tree
    # still shows at HEAD.
    (templates / "issue.txt").unlink()
    result = diff(repo)
    out = result.stdout.splitlines()
    assert any(line.startswith("-") and "Fresh from our template." in line for line in out), out


def test_each_revision_renders_with_its_own_images(repo: Path) -> None:
    (repo / "issues" / "chart.png").write_bytes(png(300, 120))
    edit(repo / "issues" / "1.md", "## Tools", "![A chart](chart.png)\n\n## Tools")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a chart")
    (repo / "issues" / "chart.png").unlink()  # gone from the work tree, still in git
    result = diff(repo, "HEAD~1", "HEAD")
    assert result.exit_code == 0, result.output
    assert any(line.startswith("+Image: A chart ") for line in result.stdout.splitlines())
    # The work tree has lost it: that side's fault is named at the issue's line, by its side.
    broken = diff(repo)
    assert broken.exit_code == 1
    first = broken.stderr.splitlines()[0]
    assert first.startswith("error: working tree: issues/1.md:"), first
    assert first.endswith("chart.png: no such file in issues"), first
    assert "newsletter-diff-" not in broken.stderr  # no temporary folder in what is said


def test_a_finding_moved_by_a_line_above_is_neither_gone_nor_new(repo: Path) -> None:
    (repo / "issues" / "chart.png").write_bytes(png(300, 120))
    edit(repo / "issues" / "1.md", "## Tools", "![](chart.png)\n\n## Tools")  # no alt text
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a chart, undescribed")
    edit(repo / "issues" / "1.md", "## Worth reading", "A new line.\n\n## Worth reading")
    result = diff(repo)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert "findings: 0 errors, 1 warnings -> 0 errors, 1 warnings" in out
    assert not [line for line in out if line.startswith(("  + warning", "  - warning"))], out
    # Described, it is gone.
    edit(repo / "issues" / "1.md", "![](chart.png)", "![A chart](chart.png)")
    out = diff(repo).stdout.splitlines()
    assert "findings: 0 errors, 1 warnings -> 0 errors, 0 warnings" in out
    gone = [line for line in out if line.startswith("  - warning: issues/1.md:")]
    assert len(gone) == 1, out
    assert gone[0].endswith("[alt]"), gone


def test_a_project_in_a_folder_of_its_repository(tmp_path: Path) -> None:
    repository = tmp_path / "site"
    root = repository / "newsletter"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    (repository / "README.md").write_text("The site and its newsletter.\n", encoding="utf-8")
    git(repository, "init", "-q")
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "base")
    one_word_and_one_link(root)
    git(repository, "commit", "-q", "-am", "one word, one link")
    result = diff(root, "HEAD~1", "HEAD")
    assert result.exit_code == 0, result.output
    assert "  ~ [Another link] https://example.org/another -> https://example.org/elsewhere" in (
        result.stdout.splitlines()
    )


def test_a_revision_without_the_project(repo: Path) -> None:
    git(repo, "rm", "-q", "newsletter.toml")
    git(repo, "commit", "-q", "-m", "moved away")
    result = diff(repo, "HEAD", "HEAD~1")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert re.fullmatch(r"error: HEAD \([0-9a-f]{7}\) has no newsletter\.toml: .*", first), first
    assert "Traceback" not in result.output


def test_colour_on_a_terminal_and_never_with_no_color(repo: Path) -> None:
    one_word_and_one_link(repo)
    coloured = diff(repo, color=True)
    assert coloured.exit_code == 0, coloured.output
    assert ANSI.search(coloured.stdout)
    plain = diff(repo, color=True, env={"NO_COLOR": "1"})
    assert plain.exit_code == 0, plain.output
    assert not ANSI.search(plain.stdout)
    assert ANSI.sub("", coloured.stdout) == plain.stdout


def test_not_a_git_repository(tmp_path: Path) -> None:
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    result = diff(root)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == f"error: {root}: not a git repository"
    assert "git init" in result.stderr
    assert "Traceback" not in result.output


def test_an_unknown_revision(repo: Path) -> None:
    result = diff(repo, "no-such-branch")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == "error: unknown revision 'no-such-branch'"
    assert result.stderr.splitlines()[1].startswith("hint: Name a commit git knows")
    # Nor is anything git would take for one of its options.
    result = diff(repo, "HEAD", "--", "--output=stolen")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == "error: unknown revision '--output=stolen'"
    assert not (repo / "stolen").exists()


def test_an_issue_absent_at_a_revision(repo: Path) -> None:
    (repo / "issues" / "2.md").write_text(
        (repo / "issues" / "1.md").read_text(encoding="utf-8").replace("number: 1", "number: 2"),
        encoding="utf-8",
    )
    config = str(repo / "newsletter.toml")
    result = CliRunner().invoke(cli, ["--config", config, "diff", "--issue", "2"])
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert re.fullmatch(
        r"error: issue 2 is not in HEAD \([0-9a-f]{7}\): no 2\.md, 2\.yaml or 2\.yml in its "
        r"issues folder",
        first,
    ), first
    assert result.stdout == ""
