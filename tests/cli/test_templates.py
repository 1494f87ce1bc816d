"""`newsletter templates` as an editor runs it (issue 41): the package's templates ejected into a
new project, where they override the package's; `check` warning when the installed package's
template has changed since a copy was taken (ejected.toml records what it was copied from),
and the ways to catch up: take it again, or compare, merge and follow."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.rendering.ejected import shipped_dir


@pytest.fixture
def newsletter_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project as `init --yes` writes it (no templates of its own), the working directory."""
    root = tmp_path / "news"
    result = CliRunner().invoke(cli, ["init", str(root), "--yes"])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(root)
    for var in ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS", "NEWSLETTER_SMTP_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    return root


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_eject_copies_the_templates_into_the_project_where_they_win(
    newsletter_project: Path,
) -> None:
    folder = newsletter_project / "templates" / "email"
    code, out, err = run("templates", "eject", "issue.txt")
    assert code == 0, err
    assert out.splitlines()[0] == "wrote templates/email/issue.txt"
    copy = folder / "issue.txt"
    assert copy.read_bytes() == (shipped_dir() / "issue.txt").read_bytes()
    record = tomllib.loads((folder / "ejected.toml").read_text(encoding="utf-8"))
    entry = record["templates"]["issue.txt"]
    assert entry["sha256"] == hashlib.sha256(copy.read_bytes()).hexdigest()
    assert entry["version"]
    # The copy is the one the email is made from: an edit shows in the text part.
    copy.write_text(copy.read_text(encoding="utf-8") + "Edited in the project.\n", "utf-8")
    code, _, err = run("build", "--issue", "1", "--out", "built")
    assert code == 0, err
    assert "Edited in the project." in (newsletter_project / "built" / "email.txt").read_text(
        encoding="utf-8"
    )
    # A copy there is never overwritten without --force, and nothing is copied then.
    code, out, err = run("templates", "eject")
    assert code == 1
    assert err.splitlines() == [
        "error: templates/email/issue.txt: already in the project (nothing was copied)",
        "hint: Keep your copy, name only the templates you have not taken, or add --force to"
        " replace it with the package's (your edits to it are lost).",
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["ejected.toml", "issue.txt"]
    code, out, err = run("templates", "eject", "nope.mjml")
    assert code == 1
    assert err.startswith("error: 'nope.mjml': the package has no such template\nhint: Name")
    # Without names, every template (the others as well as the one asked again with --force).
    code, out, err = run("templates", "eject", "--force")
    assert code == 0, err
    shipped = sorted(
        p.name for p in shipped_dir().iterdir() if p.suffix in (".mjml", ".txt", ".css")
    )
    assert sorted(p.name for p in folder.iterdir()) == sorted([*shipped, "ejected.toml"])
    code, out, _ = run("templates")
    assert code == 0
    assert "issue.txt      ejected from " in out
    assert ", unedited" in out.splitlines()[shipped.index("issue.txt")]


def older_release(folder: Path, name: str, *, edited: bool) -> None:
    """Make the copy of `name` one an older release ejected: its ejected.toml entry and (when
    not `edited`) the copy itself are that release's template, one block short of today's."""
    today = (shipped_dir() / name).read_text(encoding="utf-8")
    block = "          {% if issue.cover %}{{ content.image(issue.cover) }}{% endif %}\n"
    assert block in today, f"the shipped {name} no longer has the cover block"
    then = today.replace(block, "")
    copy = folder / name
    copy.write_text(then + ("<!-- the editor's -->\n" if edited else ""), encoding="utf-8")
    record = folder / "ejected.toml"
    text = record.read_text(encoding="utf-8")
    ours = hashlib.sha256(today.encode()).hexdigest()
    theirs = hashlib.sha256(then.encode()).hexdigest()
    assert ours in text
    record.write_text(text.replace(ours, theirs), encoding="utf-8")


def test_check_warns_when_an_ejected_template_is_older_than_the_package_s(
    newsletter_project: Path,
) -> None:
    folder = newsletter_project / "templates" / "email"
    assert run("templates", "eject", "issue.mjml")[0] == 0
    code, out, err = run("check", "--issue", "1")
    assert code == 0, err
    assert "template-behind" not in out + err  # just taken: the package's own
    # A copy an older release ejected, left as it was: take the new one.
    older_release(folder, "issue.mjml", edited=False)
    code, out, err = run("check", "--issue", "1")
    assert code == 0, err
    (warning,) = [line for line in out.splitlines() if "[template-behind]" in line]
    assert warning.startswith("warning: templates/email/issue.mjml: copied from newsletter ")
    assert "the installed package's issue.mjml" in warning
    assert (
        "has changed since: your copy is unedited: `newsletter templates eject --force" in warning
    )
    code, out, _ = run("templates")
    assert "the package's has changed since: `newsletter templates diff issue.mjml`" in out
    assert run("templates", "eject", "--force", "issue.mjml")[0] == 0
    code, out, err = run("check", "--issue", "1")
    assert "template-behind" not in out + err
    # An edited one: the diff shows the package's new block, and `follow` records the merge.
    older_release(folder, "issue.mjml", edited=True)
    code, out, err = run("check", "--issue", "1")
    (warning,) = [line for line in out.splitlines() if "[template-behind]" in line]
    assert "see what changed with `newsletter templates diff issue.mjml`" in warning
    code, out, err = run("templates", "diff", "issue.mjml")
    assert code == 0, err
    assert out.startswith("--- templates/email/issue.mjml\n+++ the package's issue.mjml\n")
    assert "\n+          {% if issue.cover %}{{ content.image(issue.cover) }}{% endif %}\n" in out
    assert "\n-<!-- the editor's -->\n" in out
    code, out, err = run("templates", "follow", "issue.mjml")
    assert code == 0, err
    assert out.startswith("issue.mjml: follows the package's template of ")
    code, out, err = run("check", "--issue", "1")
    assert code == 0, err
    assert "template-behind" not in out + err


def test_a_template_never_ejected_cannot_be_followed_or_compared(newsletter_project: Path) -> None:
    code, _, err = run("templates", "diff", "issue.txt")
    assert code == 1
    assert err.startswith("error: templates/email/issue.txt: the project has no copy of")
    assert run("templates", "eject", "issue.mjml")[0] == 0
    code, _, err = run("templates", "follow", "issue.txt")
    assert code == 1
    assert err.startswith("error: templates/email/ejected.toml: issue.txt was never ejected")
    assert "Traceback" not in err


def test_a_damaged_record_is_one_error_naming_it(newsletter_project: Path) -> None:
    assert run("templates", "eject", "issue.txt")[0] == 0
    record = newsletter_project / "templates" / "email" / "ejected.toml"
    record.write_text('[templates."issue.txt"]\nversion = 1\n', encoding="utf-8")
    code, _, err = run("check", "--issue", "1")
    assert code == 1
    assert err.splitlines()[-2:] == [
        'error: templates/email/ejected.toml: [templates."issue.txt"] needs version, sha256 and'
        " day (strings)",
        "hint: Take the copy again (`newsletter templates eject --force NAME`): it writes the"
        " entry.",
    ]
    record.write_text("[templates\n", encoding="utf-8")
    code, _, err = run("templates")
    assert code == 1
    assert err.startswith("error: templates/email/ejected.toml: ")
    assert "Traceback" not in err
