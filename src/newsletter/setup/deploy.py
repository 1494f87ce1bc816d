"""`newsletter deploy systemd`: a project's settings in, the files that run it in production out:
systemd units for `serve` and `worker`, a timer and its service for `bounces` (when [bounces]
imap names a mailbox to poll), a Caddyfile that puts TLS in front of `serve`, and an
environment file for the secrets the units read (EnvironmentFile=).

Every path is absolute (the project's root, its config, the `newsletter` executable), so the
units run the same whoever starts them. No secret is ever written into a unit: the project's
secret stays in `.newsletter/secret` (read from the working directory) or in the environment
file, which is made 0600 and never overwritten. A path systemd would read another way (a `%`,
a quote, a line break) is quoted or refused here, not discovered at `systemctl start`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from newsletter.config.configfile import SECRET_FILE
from newsletter.config.settings import Settings
from newsletter.errors import ConfigError

ENV_FILE = SECRET_FILE.parent / "environment"  # next to the secret, out of git like it
BOUNCES_EVERY = "*:0/10"  # the bounce mailbox read every ten minutes (OnCalendar=)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


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
    if not _NAME.fullmatch(target.user):
        raise ConfigError(f"--user {target.user!r}: not a user name", hint="Name a Unix user.")
    root = settings.root.resolve()
    run = " ".join(_word(word) for word in (*target.command, "--config", str(config.resolve())))
    state = settings.state_dir.resolve()
    common = _SERVICE.format(
        user=target.user,
        root=_value(str(root)),
        env=_value(str(root / ENV_FILE)),
        state=_word(str(state)),
    )
    name = settings.newsletter.name
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
            # SIGTERM lets the mail in hand and the sends' uploads finish.
            + "TimeoutStopSec=120\n"
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
        DeployFile("Caddyfile", caddyfile(settings)),
        DeployFile(str(root / ENV_FILE), _ENVIRONMENT, private=True),
    ]
    return files


def caddyfile(settings: Settings) -> str:
    """The site at base_url's host, TLS by Caddy (Let's Encrypt), proxied to serve."""
    url = urlsplit(settings.newsletter.base_url)
    host = url.hostname or ""
    if url.scheme != "https" or not host:
        raise ConfigError(
            f"newsletter.base_url = {settings.newsletter.base_url!r}: the Caddyfile needs the"
            " public https:// address readers reach",
            hint='Set [newsletter] base_url = "https://news.example.org" first.',
        )
    site = host if url.port is None else f"{host}:{url.port}"
    upstream = f"{settings.serve.host}:{settings.serve.port}"
    prefix = url.path.rstrip("/")
    proxy = f"reverse_proxy {upstream}"
    body = f"\thandle_path {prefix}/* {{\n\t\t{proxy}\n\t}}\n" if prefix else f"\t{proxy}\n"
    return (
        "# Caddy gets and renews the certificate for this name; serve's [serve] trusted_proxies\n"
        "# must hold 127.0.0.1 for the readers' addresses (X-Forwarded-For) to be read.\n"
        f"{site} {{\n\tencode gzip\n{body}}}\n"
    )


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

_SERVICE = """\
[Service]
User={user}
WorkingDirectory={root}
# The secrets (NEWSLETTER_SMTP_PASSWORD, ...) come from this file, never from the unit.
EnvironmentFile=-{env}
NoNewPrivileges=yes
PrivateTmp=yes
ProtectSystem=strict
ReadWritePaths={state}
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
