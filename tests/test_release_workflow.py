"""The release workflow (issue 41, the name): GitHub's own schema accepts it (offline, the schema
check-jsonschema vendors), it publishes by trusted publishing with no stored token, and its build
and check steps, run here as the runner runs them, make an sdist and a wheel of `git-newsletter`
that `twine check --strict` passes and the tag check accepts (and refuses for a wrong tag)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / ".github" / "workflows" / "release.yml"
BIN = Path(sys.executable).parent  # this environment's python, check-jsonschema and twine


def workflow() -> Any:
    return yaml.safe_load(RELEASE.read_text(encoding="utf-8"))


def test_githubs_schema_accepts_the_release_workflow() -> None:
    checked = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.github-workflows", RELEASE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_it_runs_on_a_version_tag_and_publishes_with_no_token() -> None:
    flow = workflow()
    # PyYAML reads the key `on` as True (YAML 1.1), as GitHub does not.
    assert flow[True] == {"push": {"tags": ["v*"]}}
    assert flow["permissions"] == {"contents": "read"}
    publish = flow["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}  # the OIDC token, nothing else
    (action,) = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/")]
    assert action["uses"] == "pypa/gh-action-pypi-publish@release/v1"
    assert "with" not in action  # no password, no API token: trusted publishing


@pytest.mark.slow
def test_its_build_and_check_steps_make_a_release_twine_passes(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO,
        checkout,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "out", "site", "dist", ".newsletter", "__pycache__", "*.egg-info"
        ),
    )
    steps = workflow()["jobs"]["build"]["steps"]
    runs = [s for s in steps if "run" in s and "pip install" not in s["run"]]
    assert [s["name"] for s in runs] == [
        "Build",
        "Check the tag names the version built",
        "Check the metadata and the README's rendering",
    ]
    ours = version("git-newsletter")

    def run(step: dict[str, str], tag: str) -> subprocess.CompletedProcess[str]:
        # Offline here: the build backend is this environment's (the runner fetches it).
        script = step["run"].replace("python -m build ", "python -m build --no-isolation ")
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=checkout,
            env={**env, "GITHUB_REF_NAME": tag},
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    for step in runs:
        done = run(step, f"v{ours}")
        assert done.returncode == 0, (step["name"], done.stdout, done.stderr)
    built = sorted(p.name for p in (checkout / "dist").iterdir())
    assert built == [f"git_newsletter-{ours}-py3-none-any.whl", f"git_newsletter-{ours}.tar.gz"]
    assert "PASSED" in done.stdout
    # A tag that names another version stops the release before anything is published.
    assert run(runs[1], "v99.0.0").returncode != 0
