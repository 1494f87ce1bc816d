"""The GitHub workflow `newsletter init` ships (issue 33, point 4): GitHub's own schema accepts
it, and its shell steps, run as the runner runs them on a pull request of a repository made by
init, annotate the changed issue's lines and keep a SARIF log; `--ci none` writes none, and
`init --ci github` adds it to a project that has none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.review.shots import shots_missing
from support.gitrepo import git

WORKFLOW = Path(".github") / "workflows" / "newsletter.yml"
BIN = Path(sys.executable).parent  # this environment's `newsletter` and `check-jsonschema`


def init(*args: str) -> Any:
    return CliRunner().invoke(cli, ["init", *args])


@pytest.mark.slow
def test_init_writes_a_workflow_githubs_schema_accepts(tmp_path: Path) -> None:
    done = init(str(tmp_path / "letter"), "--yes")
    assert done.exit_code == 0, done.output
    path = tmp_path / "letter" / WORKFLOW
    assert f"{WORKFLOW}\n" in done.output  # listed with the project's other files
    # The editors' README says what the file does.
    assert f"- `{WORKFLOW.as_posix()}`: GitHub checks the issues each pull request changes\n" in (
        tmp_path / "letter" / "README.md"
    ).read_text(encoding="utf-8")
    checked = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.github-workflows", path],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    steps = workflow["jobs"]["check"]["steps"]
    installs = [s["run"] for s in steps if "pip install" in s.get("run", "")]
    # By the distribution's own name (`newsletter` on the index is another project's).
    assert installs == [
        f'python -m pip install "git-newsletter[shots]=={version("git-newsletter")}"'
    ]
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    # The logs are kept when the check fails, above all; so are the pictures.
    assert [(u["with"]["name"], u["if"]) for u in uploads] == [
        ("newsletter-check", "always()"),
        ("newsletter-diff", "${{ !cancelled() }}"),
    ]
    (compare,) = [s for s in steps if "newsletter diff" in s.get("run", "")]
    assert compare["if"] == "${{ !cancelled() }}"  # after a failed check too


def test_init_ci_none_writes_no_workflow_and_ci_github_adds_it_later(tmp_path: Path) -> None:
    root = tmp_path / "letter"
    assert init(str(root), "--yes", "--ci", "none").exit_code == 0
    assert not (root / WORKFLOW).exists()
    assert "workflows" not in (root / "README.md").read_text(encoding="utf-8")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    added = init(str(root), "--ci", "github")
    assert added.exit_code == 0, added.output
    assert "on every pull request it checks the" in added.output
    assert (root / WORKFLOW).is_file()
    # Only the workflow: the project's files are as they were.
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p in before} == before
    again = init(str(root), "--ci", "github")
    assert again.exit_code == 1
    assert "newsletter.yml exists: nothing was written" in again.stderr
    assert "Traceback" not in again.output


def _pull_request(tmp_path: Path) -> tuple[Path, int]:
    """A repository made by init with a base commit on main, cloned, and a head commit on a
    branch that changes one word of issue 1 and adds a link that `check` refuses; the clone's
    folder and that link's line."""
    origin = tmp_path / "origin"
    assert init(str(origin), "--yes").exit_code == 0
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    git(work, "checkout", "-q", "-b", "one-word")
    issue = work / "issues" / "1.md"
    text = issue.read_text(encoding="utf-8").replace("Welcome to", "Hello and welcome to", 1)
    text += "\n### [The files](ftp://files.example.org/archive)\n\nA mirror of the archive.\n"
    issue.write_text(text, encoding="utf-8")
    line = text.splitlines().index("### [The files](ftp://files.example.org/archive)") + 1
    git(work, "commit", "-q", "-am", "head")
    # What actions/checkout checks out for a pull request: the head merged into the base
    # (refs/pull/N/merge), a detached HEAD.
    git(work, "checkout", "-q", "--detach", "origin/main")
    git(work, "merge", "-q", "--no-ff", "-m", "Merge one-word into main", "one-word")
    return work, line


def _run_steps(work: Path) -> tuple[int, str]:
    """The workflow's `run:` steps, in order, as the runner runs a step with `shell: bash`
    (a script file, `bash --noprofile --norc -eo pipefail`), with the variables it sets on a
    pull request and the job's env; the install step is this test's own environment. Stops at
    the first step that fails, as the runner does, but for the steps that run whatever came
    before (`if: always()` or `!cancelled()`); the first failure's exit code and all that was
    printed."""
    workflow = yaml.safe_load((work / WORKFLOW).read_text(encoding="utf-8"))
    assert workflow["defaults"]["run"]["shell"] == "bash"
    job = workflow["jobs"]["check"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWSLETTER_", "GITHUB_"))}
    env |= {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_BASE_REF": "main",
        "GITHUB_HEAD_REF": "one-word",
        "GITHUB_REF": "refs/pull/1/merge",
        "GITHUB_WORKSPACE": str(work),
        **{k: str(v) for k, v in job.get("env", {}).items()},
    }
    printed = []
    failed = 0
    for number, step in enumerate(job["steps"]):
        if "run" not in step or "pip install" in step["run"]:
            continue
        if failed and step.get("if") not in ("always()", "${{ !cancelled() }}"):
            continue
        script = work.parent / f"step-{number}.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        printed.append(done.stdout + done.stderr)
        failed = failed or done.returncode
    return failed, "".join(printed)


def _needs_screenshots() -> None:
    """The compare step takes screenshots: without a Chromium this test skips (not in CI)."""
    missing = shots_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real browser: {missing}")
        pytest.skip(missing)


@pytest.mark.slow
@pytest.mark.browser
def test_the_workflow_annotates_the_changed_issue_of_a_pull_request(tmp_path: Path) -> None:
    _needs_screenshots()
    work, line = _pull_request(tmp_path)
    code, printed = _run_steps(work)
    assert code == 1, printed  # the refused link is an error: the run fails, as check exits 1
    annotations = [row for row in printed.splitlines() if row.startswith("::")]
    assert annotations == [
        f"::error file=issues/1.md,line={line},title=newsletter check%3A link::the link to"
        " 'ftp://files.example.org/archive' must be an absolute http://, https:// or mailto:"
        " address; its text is shown without the link"
    ]
    assert "1 changed issue(s) checked" in printed
    reports = work / "newsletter-check"
    assert (reports / "changed.txt").read_text(encoding="utf-8") == "issues/1.md\n"
    log = json.loads((reports / "issue-1.sarif").read_text(encoding="utf-8"))
    (result,) = log["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location == {
        "artifactLocation": {"uri": "issues/1.md", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": line},
    }
    # The compare step ran after the failed check: the diff against the base, its page, and
    # the pull request's own screenshots, kept as the newsletter-diff artifact.
    pictures = work / "newsletter-diff"
    shots = [f"issue-1-{w}-{s}.png" for w in (375, 680) for s in ("dark", "light")]
    assert sorted(p.name for p in pictures.iterdir()) == [*shots, "issue-1.html", "issue-1.txt"]
    said = (pictures / "issue-1.txt").read_text(encoding="utf-8").splitlines()
    assert any(row.startswith("+Hello and welcome to") for row in said), said
    assert any(row.startswith("-Welcome to") for row in said), said
    page = (pictures / "issue-1.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 8
    assert "no change</h2>" not in page  # the word is marked at every width and scheme
    assert page.count("changed region") == 4


@pytest.mark.slow
@pytest.mark.browser
def test_an_issue_new_in_the_pull_request_gets_its_screenshots_only(tmp_path: Path) -> None:
    _needs_screenshots()
    work, _ = _pull_request(tmp_path)
    git(work, "checkout", "-q", "-b", "issue-two", "origin/main")
    text = (work / "issues" / "1.md").read_text(encoding="utf-8")
    (work / "issues" / "2.md").write_text(text.replace("number: 1", "number: 2"), "utf-8")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "issue 2")
    code, printed = _run_steps(work)
    assert code == 0, printed
    assert "issue 2 is new: its screenshots only" in printed
    pictures = work / "newsletter-diff"
    assert sorted(p.name for p in pictures.iterdir()) == [
        f"issue-2-{w}-{s}.png" for w in (375, 680) for s in ("dark", "light")
    ]


def test_the_workflow_passes_a_pull_request_that_changes_no_issue(tmp_path: Path) -> None:
    work, _ = _pull_request(tmp_path)
    git(work, "checkout", "-q", "-b", "readme-only", "origin/main")
    (work / "issues" / "images").mkdir()
    (work / "issues" / "images" / "2.md").write_text("not an issue\n", encoding="utf-8")
    (work / "README.md").write_text("# Our letter\n", encoding="utf-8")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "readme")
    code, printed = _run_steps(work)
    assert code == 0, printed
    assert "0 changed issue(s) checked" in printed
    assert "::" not in printed


@pytest.mark.parametrize("issues", ["letters"])
def test_init_ci_github_watches_the_projects_own_issue_folder(tmp_path: Path, issues: str) -> None:
    root = tmp_path / "letter"
    assert init(str(root), "--yes", "--ci", "none").exit_code == 0
    config = root / "newsletter.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + f'\n[paths]\nissues = "{issues}"\n', encoding="utf-8"
    )
    done = init(str(root), "--ci", "github")
    assert done.exit_code == 0, done.output
    workflow = yaml.safe_load((root / WORKFLOW).read_text(encoding="utf-8"))
    assert workflow["jobs"]["check"]["env"]["ISSUES"] == issues
