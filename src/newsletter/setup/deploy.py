"""`newsletter deploy systemd`: a project's settings in, the files that run it in production and
the commands that install them out: systemd units for `serve` and `worker`, a timer and its
service for `bounces` (when [bounces] imap names a mailbox to poll), a Caddy site file that puts
TLS in front of `serve` and one of Caddy's options (the slow clients' timeouts), both imported by
/etc/caddy/Caddyfile, never replacing it, and an environment file for the secrets the units
read (EnvironmentFile=).

Every path is absolute (the project's root, its config, the `newsletter` executable), so the
units run the same whoever starts them. No secret is ever written into a unit: the project's
secret stays in `.newsletter/secret` (read from the working directory) or in the environment
file, which is made 0600 and never overwritten. A path systemd would read another way (a `%`,
a quote, a line break) is quoted or refused here, not discovered at `systemctl start`.

The services never run as root (a flaw in `serve`, which faces the internet, would own the
machine): root is refused, with the user to create instead. Each unit is sandboxed as far as
serve and worker allow (`systemd-analyze security` rates them "OK"): no capabilities, no new
privileges, the whole file system read-only but the project's state, no other users' homes, no
devices, kernel knobs or exotic sockets.
"""

from __future__ import annotations

import pwd
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from newsletter.config.configfile import SECRET_FILE
from newsletter.config.settings import Settings
from newsletter.errors import ConfigError

ENV_FILE = SECRET_FILE.parent / "environment"  # next to the secret, out of git like it
BOUNCES_EVERY = "*:0/10"  # the bounce mailbox read every ten minutes (OnCalendar=)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The user to run the services as, made like a daemon's: no home, no login shell.
SERVICE_USER = "newsletter"
USERADD = "useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin"
CADDY_DIR = Path("/etc/caddy")
# Caddy's global options (the slow clients' timeouts), one file whatever the prefix: imported
# once, on the Caddyfile's first line (global options must come first), by every newsletter.
CADDY_OPTIONS = "newsletter-options.caddy"
CADDYFILE = CADDY_DIR / "Caddyfile"
# Where ProtectHome= and PrivateTmp= hide things: a project found there changes them.
_ROOT_HOME = Path("/root")
_HOMES = (Path("/home"), _ROOT_HOME, Path("/run/user"))
_TMP = (Path("/tmp"), Path("/var/tmp"))  # noqa: S108 (not used: looked for in paths)


@dataclass(frozen=True)
class DeployFile:
    name: str  # in the output folder; the environment file's is absolute (beside the secret)
    text: str
    private: bool = False  # 0600, and kept when it exists (it holds secrets once filled in)


@dataclass(frozen=True)
class Target:
    """Who runs what: the `newsletter` command (argv words), the Unix user, the unit prefix."""

    command: tuple[str, ...]
    user: str
    prefix: str = "newsletter"


def systemd_files(settings: Settings, config: Path, target: Target) -> list[DeployFile]:
    if not _NAME.fullmatch(target.prefix):
        raise ConfigError(
            f"--prefix {target.prefix!r}: not a unit name",
            hint="Letters, digits, '-', '_' and '.', as in newsletter-mynews.",
        )
    if f"{target.prefix}.caddy" == CADDY_OPTIONS:
        raise ConfigError(
            f"--prefix {target.prefix!r}: the name of the Caddy options file",
            hint="Name the newsletter another way, as in newsletter-mynews.",
        )
    if not _NAME.fullmatch(target.user):
        raise ConfigError(f"--user {target.user!r}: not a user name", hint="Name a Unix user.")
    refuse_root(target.user)
    root = settings.root.resolve()
    config = config.resolve()
    run = " ".join(_word(word) for word in (*target.command, "--config", str(config)))
    name = settings.newsletter.name
    common = _service(settings, target, (root, config, *_paths(target.command)))
    files = [
        DeployFile(
            f"{target.prefix}-serve.service",
            _UNIT.format(about=f"{name}: newsletter serve (unsubscribe, signup, archive)")
            + common
            + f"ExecStart={run} serve\nRestart=always\nRestartSec=5\n"
            + _INSTALL,
        ),
        DeployFile(
            f"{target.prefix}-worker.service",
            _UNIT.format(about=f"{name}: newsletter worker (site mail, scheduled sends)")
            + common
            + f"ExecStart={run} worker\nRestart=always\nRestartSec=5\n"
            # SIGTERM lets the mail in hand and the sends' uploads finish: only the worker gets
            # it (KillMode=mixed), and it stops the sends it started, which then hand back.
            + "KillMode=mixed\nTimeoutStopSec=120\n"
            + _INSTALL,
        ),
    ]
    if settings.bounces.imap:
        files += [
            DeployFile(
                f"{target.prefix}-bounces.service",
                _UNIT.format(about=f"{name}: newsletter bounces (the bounce mailbox read once)")
                + common
                + f"Type=oneshot\nExecStart={run} bounces\n",
            ),
            DeployFile(
                f"{target.prefix}-bounces.timer",
                f"[Unit]\nDescription={_value(name)}: read the bounce mailbox\n\n"
                f"[Timer]\nOnCalendar={BOUNCES_EVERY}\nPersistent=true\n\n"
                "[Install]\nWantedBy=timers.target\n",
            ),
        ]
    files += [
        DeployFile(CADDY_OPTIONS, _CADDY_OPTIONS),
        DeployFile(f"{target.prefix}.caddy", caddy_site(settings)),
        DeployFile(str(root / ENV_FILE), _ENVIRONMENT, private=True),
    ]
    return files


def refuse_root(user: str) -> None:
    """The services as root: refused, naming the user to make instead (any uid 0 counts)."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        uid = -1  # not on this machine (yet): the commands printed create it
    if user == "root" or uid == 0:
        raise ConfigError(
            f"the services would run as {user} (uid 0): a flaw in serve, which answers the"
            " internet, would own the whole machine",
            hint=f"Create a user of their own and name it: {USERADD} {SERVICE_USER}; then"
            f" newsletter deploy systemd --user {SERVICE_USER}",
        )


def state_folders(settings: Settings) -> list[Path]:
    """What the services write (ReadWritePaths=): the state folder, and a SQLite outbox's
    folder when [outbox] url puts the file elsewhere (its -wal and -shm files sit beside it)."""
    state = settings.state_dir.resolve()
    folders = [state]
    target = settings.database_target
    if isinstance(target, Path):
        folder = target.resolve().parent
        if not folder.is_relative_to(state):
            folders.append(folder)
    return folders


def shares_tmp(paths: Iterable[Path]) -> Path | None:
    """The first of `paths` in the machine's /tmp or /var/tmp, which PrivateTmp=yes would hide."""
    return next((p for p in paths if any(p.is_relative_to(t) for t in _TMP)), None)


def in_roots_home(settings: Settings, command: tuple[str, ...]) -> Path | None:
    """The first path the services read (project, executable) inside /root: 0700, so their
    user cannot reach it (a `sudo pipx install` or a project made in root's home, say)."""
    reads = (settings.root.resolve(), *_paths(command))
    return next((p for p in reads if p.is_relative_to(_ROOT_HOME)), None)


def _service(settings: Settings, target: Target, reads: tuple[Path, ...]) -> str:
    state = state_folders(settings)
    root = settings.root.resolve()
    lines = [
        "[Service]",
        f"User={target.user}",
        f"WorkingDirectory={_value(str(root))}",
        "# The secrets (NEWSLETTER_SMTP_PASSWORD, ...) come from this file, never from the unit.",
        f"EnvironmentFile=-{_value(str(root / ENV_FILE))}",
        "UMask=0077",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "AmbientCapabilities=",
        "# The whole file system read-only, but what the services write.",
        "ProtectSystem=strict",
        *(f"ReadWritePaths={_word(str(folder))}" for folder in state),
    ]
    if any(p.is_relative_to(h) for p in (*reads, *state) for h in _HOMES):
        lines += [
            "# The project (or this newsletter) lives in a home folder: it is read there.",
            "ProtectHome=read-only",
        ]
    else:
        lines.append("ProtectHome=yes")
    shared = shares_tmp((*reads, *state))
    if shared is not None:
        lines += [
            f"# {_value(str(shared))} is in the machine's temporary folder, which PrivateTmp=yes",
            "# would hide: move the project (to /srv/newsletter, say) for a private /tmp.",
            "PrivateTmp=no",
            # /tmp is read-only then (ProtectSystem=strict): temporary files go with the state.
            f"Environment={_word('TMPDIR=' + str(state[0]))}",
        ]
    else:
        lines.append("PrivateTmp=yes")
    return "\n".join(lines) + "\n" + _SANDBOX


def _paths(command: tuple[str, ...]) -> list[Path]:
    return [Path(word) for word in command if Path(word).is_absolute()]


def caddy_site(settings: Settings) -> str:
    """The site at base_url's host, TLS by Caddy (Let's Encrypt), proxied to serve."""
    url = urlsplit(settings.newsletter.base_url)
    host = url.hostname or ""
    if url.scheme != "https" or not host:
        raise ConfigError(
            f"newsletter.base_url = {settings.newsletter.base_url!r}: the Caddy site needs the"
            " public https:// address readers reach",
            hint='Set [newsletter] base_url = "https://news.example.org" first.',
        )
    site = host if url.port is None else f"{host}:{url.port}"
    upstream = f"{settings.serve.host}:{settings.serve.port}"
    prefix = url.path.rstrip("/")
    proxy = f"reverse_proxy {upstream}"
    body = f"\thandle_path {prefix}/* {{\n\t\t{proxy}\n\t}}\n" if prefix else f"\t{proxy}\n"
    return (
        "# Imported by /etc/caddy/Caddyfile (`newsletter deploy systemd` prints the line).\n"
        "# Caddy gets and renews the certificate for this name; serve's [serve] trusted_proxies\n"
        "# must hold 127.0.0.1 for the readers' addresses (X-Forwarded-For) to be read.\n"
        f"{site} {{\n\tencode gzip\n{body}}}\n"
    )


_CADDY_OPTIONS = (
    "# Caddy's global options, imported on the first line of /etc/caddy/Caddyfile: serve's own\n"
    "# [serve] timeout enforced at the door, per client (docs/guide/production.md).\n"
    "{\n\tservers {\n\t\ttimeouts {\n"
    "\t\t\tread_header 10s\n\t\t\tread_body 10s\n\t\t\twrite 30s\n\t\t\tidle 1m\n"
    "\t\t}\n\t}\n}\n"
)


def install_commands(
    files: list[DeployFile],
    out: Path,
    target: Target,
    settings: Settings,
    config: Path,
    *,
    me: str,
    sudo: bool,
) -> list[str]:
    """The shell lines that put the written files in place, for exactly those files: the user
    (when missing), the state folder given to it, the units copied and enabled, the Caddy site
    imported; then `doctor` as the services' user with their environment. `sudo` before each
    when `me`, who runs deploy, is not root."""
    run = "sudo " if sudo else ""
    out = out.resolve()
    units = [f for f in files if f.name.endswith((".service", ".timer"))]
    started = [
        f.name.removesuffix(".service") for f in units if not f.name.endswith("-bounces.service")
    ]
    lines: list[str] = []
    try:
        uid = pwd.getpwnam(target.user).pw_uid
    except KeyError:
        uid = -1
        lines.append(f"{run}{USERADD} {target.user}")
    for folder in state_folders(settings):
        try:
            owner = folder.stat().st_uid
        except OSError:  # not made yet (the manual's example): given to the user all the same
            owner = -2
        if owner != uid:
            lines.append(f"{run}chown -R {target.user}: {shlex.quote(str(folder))}")
    copied = " ".join(shlex.quote(str(out / f.name)) for f in units)
    lines += [
        f"{run}cp {copied} /etc/systemd/system/",
        f"{run}systemctl daemon-reload",
        f"{run}systemctl enable --now {' '.join(started)}",
    ]
    # The options on top, the site at the end, each line once however often this is run.
    for name, where in ((CADDY_OPTIONS, "1i"), (f"{target.prefix}.caddy", "$a")):
        installed = CADDY_DIR / name
        line = f"import {_caddy_word(str(installed))}"
        lines += [
            f"{run}cp {shlex.quote(str(out / name))} {installed}",
            f"{run}grep -qxF {shlex.quote(line)} {CADDYFILE} ||"
            f" {run}sed -i {shlex.quote(f'{where} {line}')} {CADDYFILE}",
        ]
    lines += [
        f"{run}systemctl reload caddy",
    ]
    # The passwords are in the environment file only: doctor needs them as the units have them.
    root = settings.root.resolve()
    doctor = shlex.join([*target.command, "--config", str(config.resolve()), "doctor"])
    script = f"set -a; . {shlex.quote(str(root / ENV_FILE))}; set +a; exec {doctor}"
    if target.user == me:
        as_user = ""
    elif sudo:
        as_user = f"sudo -u {target.user} "
    else:
        as_user = f"runuser -u {target.user} -- "  # root's own: util-linux, sudo or not
    lines.append(f"{as_user}sh -c {shlex.quote(script)}")
    return lines


def _caddy_word(text: str) -> str:
    return f'"{text}"' if re.search(r'[\s"{}#]', text) else text


def _word(text: str) -> str:
    """One word of ExecStart=: quoted when it holds a space, `%` doubled (a specifier)."""
    _plain(text)
    text = text.replace("%", "%%")
    if re.search(r'[\s"\'\\;$]', text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _value(text: str) -> str:
    """A whole-line setting's value (WorkingDirectory=, Description=): `%` doubled."""
    _plain(text)
    return text.replace("%", "%%")


def _plain(text: str) -> None:
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ConfigError(
            f"{text!r}: a control character (a line break?) cannot be written into a unit",
            hint="Move the project to a folder whose path has none.",
        )


_UNIT = """\
[Unit]
Description={about}
After=network-online.target
Wants=network-online.target

"""

# What serve and worker never need; each line is one of `systemd-analyze security`'s checks.
# Left out on purpose: PrivateNetwork and IPAddressDeny (they speak SMTP, DNS, PostgreSQL),
# SystemCallFilter=~@resources (serve raises its own open-files limit), MemoryDenyWriteExecute
# (Python extensions may need it), PrivateUsers (files shared by group would read as nobody's).
_SANDBOX = """\
PrivateDevices=yes
PrivateMounts=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
"""

_INSTALL = """
[Install]
WantedBy=multi-user.target
"""

_ENVIRONMENT = """\
# The secrets the units read (EnvironmentFile=); keep this file 0600 and out of git.
# The project's secret is read from .newsletter/secret; set it here only to override it:
# NEWSLETTER_SECRET=
# NEWSLETTER_SECRET_PREVIOUS=
# NEWSLETTER_SMTP_PASSWORD=
# NEWSLETTER_BOUNCES_PASSWORD=
"""
