"""`newsletter deploy systemd` through the CLI: the units, the bounces timer and the Caddyfile
it writes are accepted by `systemd-analyze verify` and `caddy validate` (both from Debian,
installed by .ci/run: in CI their absence fails the test), carry the project's absolute paths
and never a secret; the environment file is 0600 and kept."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli

SECRET = "deploy-test-secret-0123456789abcdef"
SMTP_PASSWORD = "smtp-password-never-in-a-unit"


def _tool(name: str) -> str:
    """The program's path; missing: a failure in CI (.ci/run installs it), a skip elsewhere."""
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is not installed (Debian: .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _deploy(project: Path, *args: str, **env: str) -> tuple[int, str]:
    environ = {
        "NEWSLETTER_SECRET": SECRET,
        "NEWSLETTER_SMTP_PASSWORD": SMTP_PASSWORD,
        "NEWSLETTER_NEWSLETTER__BASE_URL": "https://news.example.org",
        **env,
    }
    result = CliRunner().invoke(cli, ["deploy", "systemd", *args], env=environ)
    return result.exit_code, result.output


def _units(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


def test_units_with_the_projects_paths_and_no_secret(project: Path) -> None:
    imap = "imaps://bounces%40news.example.org@imap.example.org/INBOX"
    code, output = _deploy(project, NEWSLETTER_BOUNCES__IMAP=imap)
    assert code == 0, output
    files = _units(project / "deploy")
    assert set(files) == {
        "newsletter-serve.service",
        "newsletter-worker.service",
        "newsletter-bounces.service",
        "newsletter-bounces.timer",
        "Caddyfile",
    }
    root = str(project.resolve())
    for name in ("serve", "worker", "bounces"):
        unit = files[f"newsletter-{name}.service"]
        # This very newsletter: the venv's script, or its Python running the package.
        start = re.search(r"(?m)^ExecStart=(\S+)(?: -m newsletter)? --config (\S+) (\S+)$", unit)
        assert start is not None, unit
        assert Path(start[1]).is_absolute()
        assert Path(start[1]).parent == Path(sys.executable).parent
        assert start[2] == f"{root}/newsletter.toml"
        assert start[3] == name
        assert f"WorkingDirectory={root}\n" in unit
        assert f"EnvironmentFile=-{root}/.newsletter/environment\n" in unit
        assert f"User={getpass.getuser()}\n" in unit
    assert "OnCalendar=*:0/10" in files["newsletter-bounces.timer"]
    for text in files.values():
        assert SECRET not in text
        assert SMTP_PASSWORD not in text
    environment = project / ".newsletter" / "environment"
    assert stat.S_IMODE(environment.stat().st_mode) == 0o600
    assert SMTP_PASSWORD not in environment.read_text(encoding="utf-8")


def test_systemd_analyze_verifies_the_units(project: Path) -> None:
    analyze = _tool("systemd-analyze")
    imap = "imaps://bounces%40news.example.org@imap.example.org/INBOX"
    assert _deploy(project, NEWSLETTER_BOUNCES__IMAP=imap)[0] == 0
    units = sorted(str(p) for p in (project / "deploy").glob("newsletter-*"))
    checked = subprocess.run(
        [analyze, "verify", *units], capture_output=True, text=True, check=False, timeout=120
    )
    assert checked.returncode == 0, checked.stderr
    assert "newsletter" not in checked.stderr, checked.stderr  # no warning about our units


def test_caddy_validates_the_caddyfile_with_a_path_prefix(project: Path) -> None:
    caddy = _tool("caddy")
    url = "https://example.org/news"
    assert _deploy(project, NEWSLETTER_NEWSLETTER__BASE_URL=url)[0] == 0
    caddyfile = project / "deploy" / "Caddyfile"
    assert "handle_path /news/* {" in caddyfile.read_text(encoding="utf-8")
    checked = subprocess.run(
        [caddy, "validate", "--config", str(caddyfile), "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "HOME": str(project), "XDG_DATA_HOME": str(project / "caddy")},
    )
    assert checked.returncode == 0, checked.stderr


def test_no_bounces_timer_without_a_mailbox_and_the_environment_file_is_kept(
    project: Path,
) -> None:
    environment = project / ".newsletter" / "environment"
    code, output = _deploy(project, "--out", "units", "--prefix", "newsletter-mynews")
    assert code == 0, output
    assert "no bounces timer: [bounces] imap is not set" in output
    assert {p.name for p in (project / "units").glob("*.timer")} == set()
    assert (project / "units" / "newsletter-mynews-serve.service").exists()
    environment.write_text("NEWSLETTER_SMTP_PASSWORD=filled-in\n", encoding="utf-8")
    code, output = _deploy(project, "--out", "units")
    assert code == 0, output
    assert "kept .newsletter/environment" in output
    assert environment.read_text(encoding="utf-8") == "NEWSLETTER_SMTP_PASSWORD=filled-in\n"


def test_an_http_base_url_is_refused_naming_the_fix(project: Path) -> None:
    code, output = _deploy(project, NEWSLETTER_NEWSLETTER__BASE_URL="http://127.0.0.1:8025")
    assert code == 1
    assert "the Caddyfile needs the public https:// address" in output
    assert 'base_url = "https://' in output
    assert not (project / "deploy").exists()


@pytest.mark.slow
def test_a_path_with_a_space_and_a_percent_is_quoted_for_systemd(tmp_path: Path) -> None:
    analyze = _tool("systemd-analyze")
    project = tmp_path / "my news 100%"
    done = subprocess.run(
        [sys.executable, "-m", "newsletter", "init", str(project), "--yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    base = {"NEWSLETTER_NEWSLETTER__BASE_URL": "https://news.example.org"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")} | base
    done = subprocess.run(
        [sys.executable, "-m", "newsletter", "deploy", "systemd"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    serve = (project / "deploy" / "newsletter-serve.service").read_text(encoding="utf-8")
    assert f'--config "{project.resolve()}/newsletter.toml"'.replace("%", "%%") in serve
    checked = subprocess.run(
        [analyze, "verify", str(project / "deploy" / "newsletter-serve.service")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
