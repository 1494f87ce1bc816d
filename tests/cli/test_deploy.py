"""`newsletter deploy systemd` through the CLI: the units, the bounces timer and the Caddy site
it writes are accepted by `systemd-analyze verify`, rated OK by `systemd-analyze security` and,
imported by a Caddyfile through the very commands deploy prints, by `caddy validate` (all from
Debian, installed by .ci/run: in CI their absence fails the test); they carry the project's
absolute paths and never a secret, never run as root; the environment file is 0600 and kept."""

from __future__ import annotations

import getpass
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import Settings
from newsletter.setup.deploy import Target, in_roots_home, systemd_files

SECRET = "deploy-test-secret-0123456789abcdef"
SMTP_PASSWORD = "smtp-password-never-in-a-unit"
USER = "newsletter"  # no such user on the test machine: deploy prints the useradd line
IMAP = "imaps://bounces%40news.example.org@imap.example.org/INBOX"
# `systemd-analyze security`'s overall exposure, x10 (--threshold's scale): "OK" is up to 2.0
# (the units of the old deploy, running as root with three settings, scored 9.0, "UNSAFE").
EXPOSURE_THRESHOLD = 20


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
    if "--user" not in args:
        args = ("--user", USER, *args)
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
    code, output = _deploy(project, NEWSLETTER_BOUNCES__IMAP=IMAP)
    assert code == 0, output
    files = _units(project / "deploy")
    assert set(files) == {
        "newsletter-serve.service",
        "newsletter-worker.service",
        "newsletter-bounces.service",
        "newsletter-bounces.timer",
        "newsletter.caddy",
        "newsletter-options.caddy",
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
        assert f"User={USER}\n" in unit
        assert f"ReadWritePaths={root}/.newsletter\n" in unit
        assert "CapabilityBoundingSet=\n" in unit
    # SIGTERM to the worker alone: it stops the sends it started itself (they hand back).
    assert "KillMode=mixed\n" in files["newsletter-worker.service"]
    assert "OnCalendar=*:0/10" in files["newsletter-bounces.timer"]
    for text in files.values():
        assert SECRET not in text
        assert SMTP_PASSWORD not in text
    environment = project / ".newsletter" / "environment"
    assert stat.S_IMODE(environment.stat().st_mode) == 0o600
    assert SMTP_PASSWORD not in environment.read_text(encoding="utf-8")


def _analyze() -> str:
    """systemd-analyze, new enough to rate a unit file offline against a threshold (250+)."""
    analyze = _tool("systemd-analyze")
    helptext = subprocess.run(
        [analyze, "--help"], capture_output=True, text=True, check=False, timeout=60
    ).stdout
    if "--offline" not in helptext or "--threshold" not in helptext:
        pytest.fail(f"{analyze} has no --offline/--threshold (systemd 250 or newer needed)")
    return analyze


def _security(unit: Path) -> tuple[int, str]:
    """`systemd-analyze security` of a unit file: its exit code at EXPOSURE_THRESHOLD, its lines."""
    rated = subprocess.run(
        [
            _analyze(),
            "security",
            "--offline=yes",
            f"--threshold={EXPOSURE_THRESHOLD}",
            "--no-pager",
            str(unit),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return rated.returncode, rated.stdout + rated.stderr


def test_systemd_analyze_verifies_the_units(project: Path) -> None:
    analyze = _tool("systemd-analyze")
    assert _deploy(project, NEWSLETTER_BOUNCES__IMAP=IMAP)[0] == 0
    deploy = project / "deploy"
    units = sorted(str(p) for p in deploy.iterdir() if p.suffix in {".service", ".timer"})
    assert len(units) == 4
    checked = subprocess.run(
        [analyze, "verify", *units], capture_output=True, text=True, check=False, timeout=120
    )
    assert checked.returncode == 0, checked.stderr
    assert "newsletter" not in checked.stderr, checked.stderr  # no warning about our units


def test_systemd_analyze_security_rates_the_units_ok_in_tmp(project: Path) -> None:
    """The test's project is under /tmp: PrivateTmp=yes would hide it from the services, so the
    units share the machine's /tmp (said in the unit and on the terminal) and still rate OK."""
    code, output = _deploy(project, NEWSLETTER_BOUNCES__IMAP=IMAP)
    assert code == 0, output
    assert "is under /tmp, which PrivateTmp=yes would hide" in output
    for name in ("serve", "worker", "bounces"):
        unit = project / "deploy" / f"newsletter-{name}.service"
        text = unit.read_text(encoding="utf-8")
        assert "PrivateTmp=no\n" in text
        assert f"Environment=TMPDIR={project.resolve()}/.newsletter\n" in text
        code, rating = _security(unit)
        assert code == 0, rating
        assert re.search(r"Overall exposure level for \S+: [01]\.\d OK", rating), rating


def test_systemd_analyze_security_rates_a_project_in_srv_ok(settings: Settings) -> None:
    """A project where production.md puts it (/srv/newsletter): a private /tmp, no homes."""
    project = settings.model_copy(update={"root": Path("/srv/newsletter")})
    target = Target(("/usr/local/bin/newsletter",), USER)
    files = systemd_files(project, Path("/srv/newsletter/newsletter.toml"), target)
    serve = next(f for f in files if f.name == "newsletter-serve.service")
    assert "PrivateTmp=yes\n" in serve.text
    assert "ProtectHome=yes\n" in serve.text
    assert "ReadWritePaths=/srv/newsletter/.newsletter\n" in serve.text
    unit = Path(settings.root) / "newsletter-serve.service"
    unit.write_text(serve.text, encoding="utf-8")
    code, rating = _security(unit)
    assert code == 0, rating
    assert re.search(r"Overall exposure level for \S+: [01]\.\d OK", rating), rating


def test_a_project_in_a_home_folder_is_read_there(settings: Settings) -> None:
    project = settings.model_copy(update={"root": Path("/home/ann/news")})
    target = Target(("/home/ann/.local/bin/newsletter",), USER)
    serve = systemd_files(project, Path("/home/ann/news/newsletter.toml"), target)[0]
    assert "ProtectHome=read-only\n" in serve.text
    assert "ReadWritePaths=/home/ann/news/.newsletter\n" in serve.text


def test_a_project_or_executable_in_roots_home_is_named(settings: Settings) -> None:
    """A fresh server's first reflex (a project in ~, `sudo pipx install`) puts what the
    services read in /root, 0700: deploy names it instead of a unit that cannot start."""
    srv = settings.model_copy(update={"root": Path("/srv/newsletter")})
    assert in_roots_home(srv, ("/usr/local/bin/newsletter",)) is None
    pipx = "/root/.local/pipx/venvs/git-newsletter/bin/newsletter"
    assert in_roots_home(srv, (pipx,)) == Path(pipx)
    home = settings.model_copy(update={"root": Path("/root/news")})
    assert in_roots_home(home, ("/usr/local/bin/newsletter",)) == Path("/root/news")


def test_root_is_refused_naming_the_user_to_create(project: Path) -> None:
    code, output = _deploy(project, "--user", "root")
    assert code == 1, output
    assert "error: the services would run as root" in output
    assert "useradd --system" in output
    assert "newsletter deploy systemd --user newsletter" in output
    assert not (project / "deploy").exists()
    # With no --user, the user running deploy: refused the same when that is root.
    result = CliRunner().invoke(
        cli, ["deploy", "systemd"], env={"NEWSLETTER_NEWSLETTER__BASE_URL": "https://a.example"}
    )
    if os.geteuid() == 0:
        assert result.exit_code == 1, result.output
        assert "error: the services would run as root" in result.output
        assert not (project / "deploy").exists()
    else:
        assert result.exit_code == 0, result.output
        unit = (project / "deploy" / "newsletter-serve.service").read_text(encoding="utf-8")
        assert f"User={getpass.getuser()}\n" in unit


DEBIAN_CADDYFILE = """\
# The Caddyfile is an easy way to configure your Caddy web server.

:80 {
\troot * /usr/share/caddy
\tfile_server
}
"""


def _install(project: Path, output: str, etc: Path) -> list[str]:
    """Run the install lines deploy printed, /etc/ moved to `etc` (systemctl, useradd and chown
    left out: this machine has no systemd to tell); returns the lines."""
    lines = [
        line.strip()
        for line in output.split("then, to install them", 1)[1].splitlines()[1:]
        if line.startswith("  ")
    ]
    for line in lines:
        if line.split()[0] in {"cp", "grep"}:
            done = subprocess.run(
                ["bash", "-c", line.replace("/etc/", f"{etc}/")],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
                cwd=project,
            )
            assert done.returncode == 0, (line, done.stderr)
    return lines


def _caddy_validate(caddyfile: Path, home: Path) -> None:
    checked = subprocess.run(
        [_tool("caddy"), "validate", "--config", str(caddyfile), "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "caddy")},
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("imap", [IMAP, ""], ids=["with-imap", "without-imap"])
def test_the_printed_commands_install_exactly_what_was_written(project: Path, imap: str) -> None:
    """The lines deploy prints, run as printed (twice: the import goes in once), install the
    units it wrote and no other, and leave a Caddyfile that imports the site at its top."""
    _tool("caddy")
    etc = project / "etc"
    (etc / "systemd" / "system").mkdir(parents=True)
    (etc / "caddy").mkdir()
    (etc / "caddy" / "Caddyfile").write_text(DEBIAN_CADDYFILE, encoding="utf-8")
    url = "https://example.org/news"
    code, output = _deploy(
        project, NEWSLETTER_BOUNCES__IMAP=imap, NEWSLETTER_NEWSLETTER__BASE_URL=url
    )
    assert code == 0, output
    lines = _install(project, output, etc)
    assert _install(project, output, etc) == lines
    units = {"newsletter-serve.service", "newsletter-worker.service"}
    enabled = "systemctl enable --now newsletter-serve newsletter-worker"
    if imap:
        units |= {"newsletter-bounces.service", "newsletter-bounces.timer"}
        enabled += " newsletter-bounces.timer"
    assert {p.name for p in (etc / "systemd" / "system").iterdir()} == units
    prefix = "" if os.geteuid() == 0 else "sudo "
    assert prefix + enabled in lines
    assert prefix + "systemctl daemon-reload" in lines
    assert f"{prefix}useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin {USER}" in (
        lines
    )
    assert f"{prefix}chown -R {USER}: {shlex.quote(str(project.resolve()))}/.newsletter" in lines
    assert "*" not in "".join(lines)  # no glob that matches nothing
    assert re.fullmatch(
        f"(sudo -u|runuser -u) {USER} (-- )?sh -c 'set -a; \\. \\S+/\\.newsletter/environment;"
        r" set \+a; exec \S+(?: -m newsletter)? --config \S+/newsletter\.toml doctor'",
        lines[-1],
    ), lines[-1]
    caddyfile = etc / "caddy" / "Caddyfile"
    text = caddyfile.read_text(encoding="utf-8")
    # The global options on top (they must come first), the site at the end, each once, the
    # rest of the file kept.
    options = f"import {etc}/caddy/newsletter-options.caddy\n"
    assert text == options + DEBIAN_CADDYFILE + f"import {etc}/caddy/newsletter.caddy\n"
    timeouts = (etc / "caddy" / "newsletter-options.caddy").read_text(encoding="utf-8")
    for timeout in ("read_header 10s", "read_body 10s", "write 30s", "idle 1m"):
        assert timeout in timeouts
    site = (etc / "caddy" / "newsletter.caddy").read_text(encoding="utf-8")
    assert "handle_path /news/* {" in site
    _caddy_validate(caddyfile, project)
    analyze = _tool("systemd-analyze")
    installed = sorted(str(p) for p in (etc / "systemd" / "system").iterdir())
    checked = subprocess.run(
        [analyze, "verify", *installed], capture_output=True, text=True, check=False, timeout=120
    )
    assert checked.returncode == 0, checked.stderr


def test_a_second_newsletter_joins_the_caddyfile_beside_the_first(project: Path) -> None:
    """--prefix: a second site imported at the end, the shared options still once on top."""
    etc = project / "etc"
    (etc / "systemd" / "system").mkdir(parents=True)
    (etc / "caddy").mkdir()
    (etc / "caddy" / "Caddyfile").write_text(DEBIAN_CADDYFILE, encoding="utf-8")
    code, output = _deploy(project)
    assert code == 0, output
    _install(project, output, etc)
    second = ("--prefix", "newsletter-b", "--out", "deploy-b")
    code, output = _deploy(project, *second, NEWSLETTER_NEWSLETTER__BASE_URL="https://b.example")
    assert code == 0, output
    _install(project, output, etc)
    caddyfile = etc / "caddy" / "Caddyfile"
    lines = caddyfile.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"import {etc}/caddy/newsletter-options.caddy"
    assert lines.count(lines[0]) == 1
    assert lines[-2:] == [
        f"import {etc}/caddy/newsletter.caddy",
        f"import {etc}/caddy/newsletter-b.caddy",
    ]
    assert "b.example {" in (etc / "caddy" / "newsletter-b.caddy").read_text(encoding="utf-8")
    _caddy_validate(caddyfile, project)


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
    assert "the Caddy site needs the public https:// address" in output
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
        [sys.executable, "-m", "newsletter", "deploy", "systemd", "--user", USER],
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
