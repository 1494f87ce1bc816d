"""newsletter.toml + NEWSLETTER_* environment variables -> one typed, validated Settings.

Any key can be overridden from the environment as NEWSLETTER_<SECTION>__<KEY> (for example
NEWSLETTER_SMTP__PORT=2525, NEWSLETTER_LISTS__MAIN__PATH=all.csv). Secrets come only from the
environment (NEWSLETTER_SECRET, NEWSLETTER_SMTP_PASSWORD), are held as SecretStr and never printed.
Relative paths in the file are relative to the file's folder, the project root.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from newsletter.errors import ConfigError

ENV_PREFIX = "NEWSLETTER_"
SECRET_ENV = {
    "secret": "NEWSLETTER_SECRET",
    "smtp_password": "NEWSLETTER_SMTP_PASSWORD",
    "bounces_password": "NEWSLETTER_BOUNCES_PASSWORD",
}
CONFIG_NAME = "newsletter.toml"
SQLITE_SCHEME = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


# The list a command means when none is named.
DEFAULT_LIST = "main"


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NewsletterSettings(Section):
    name: str = "Newsletter"
    language: str = "en"
    sender: str = "Newsletter <newsletter@example.org>"
    reply_to: str = ""
    # The mailto: in List-Unsubscribe (default: the sender); the token rides in its subject.
    unsubscribe_email: str = ""
    base_url: str = "http://127.0.0.1:8025"
    greeting_fallback: str = "friend"
    sample_name: str = "Sample Reader"
    sample_email: str = "reader@example.org"


class RenderSettings(Section):
    inliner: Literal["css-inline", "premailer"] = "css-inline"


class PathSettings(Section):
    issues: Path = Path("issues")
    templates: Path = Path("templates/email")
    state: Path = Path(".newsletter")


class ListSettings(Section):
    path: Path
    name: str = ""
    id: str = ""
    staging: bool = False


class SmtpSettings(Section):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 1025
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str = ""
    verify: bool = True
    ca_file: Path | None = None
    timeout: Annotated[float, Field(gt=0)] = 30.0
    messages_per_connection: Annotated[int, Field(ge=1)] = 50


class SendSettings(Section):
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    rate: Annotated[float, Field(ge=0)] = 0.0
    rate_per_hour: Annotated[int, Field(ge=0)] = 0
    max_attempts: Annotated[int, Field(ge=1)] = 5
    retry_base: Annotated[float, Field(gt=0)] = 1.0
    retry_cap: Annotated[float, Field(gt=0)] = 60.0
    breaker_threshold: Annotated[int, Field(ge=1)] = 5
    # Worker processes sharing the connections; > 1 only pays off when a fast server makes the
    # send CPU-bound (see benchmarks/send.py).
    processes: Annotated[int, Field(ge=1, le=16)] = 1


class DkimSettings(Section):
    domain: str
    selector: str
    private_key: Path
    # Optional Ed25519 (RFC 8463) signature beside the RSA one, under its own selector.
    ed25519_key: Path | None = None
    ed25519_selector: str = ""


class ServeSettings(Section):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8025
    # The web archive shows "all" issue files, or only those "sent" to a subscriber list (a
    # draft stays private; a staging send makes its page reachable, not listed).
    publish: Literal["all", "sent"] = "all"


class BouncesSettings(Section):
    # VERP: each message's envelope sender becomes bounces+TAG@domain when this is set.
    return_path: str = ""
    # imaps://user@host[:port]/FOLDER; the password comes from NEWSLETTER_BOUNCES_PASSWORD.
    imap: str = ""
    ca_file: Path | None = None  # a CA to trust besides the system's
    timeout: Annotated[float, Field(gt=0)] = 30.0
    # Understood reports are moved to this folder; "" flags them (Seen and a keyword) instead.
    processed: str = "Newsletter-Processed"
    soft_limit: Annotated[int, Field(ge=1)] = 3  # soft bounces in a row that suppress
    max_hard_rate: Annotated[float, Field(ge=0, le=1)] = 0.05  # of a run's attempts: stop
    max_complaint_rate: Annotated[float, Field(ge=0, le=1)] = 0.001
    min_sample: Annotated[int, Field(ge=1)] = 100  # attempts before the rates apply


class OutboxSettings(Section):
    # "" is the SQLite file outbox.sqlite3 in [paths] state; `sqlite:///FILE` another file
    # (relative to the project root); `postgresql://USER@HOST:PORT/DB` a shared PostgreSQL.
    url: str = ""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if url and not url.startswith((SQLITE_SCHEME, *POSTGRES_SCHEMES)):
            raise ValueError(
                "must be empty (the SQLite file in .newsletter/), sqlite:///FILE"
                " or postgresql://USER@HOST:PORT/DATABASE"
            )
        return url


class CheckSettings(Section):
    """`newsletter check --online`: the sender's DNS and every link of the issue."""

    online: bool = False
    # Hosts (and their subdomains) never fetched: sites that refuse robots.
    link_skip: list[str] = Field(default_factory=list)
    # "IP" or "IP:PORT" ("[IPv6]:PORT"); empty: the system's resolver (/etc/resolv.conf).
    nameservers: list[str] = Field(default_factory=list)
    cache_ttl: Annotated[float, Field(ge=0)] = 3600.0  # seconds a link or DNS answer is reused
    timeout: Annotated[float, Field(gt=0)] = 5.0  # seconds per DNS lookup or link
    concurrency: Annotated[int, Field(ge=1, le=32)] = 4  # links fetched at once (1 per host)
    ca_file: Path | None = None  # a CA to trust besides the system's, for the link check

    @field_validator("nameservers")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for entry in value:
            nameserver_address(entry)
        return value

    @field_validator("link_skip")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [host.strip().lower().rstrip(".") for host in value if host.strip()]


def nameserver_address(entry: str) -> tuple[str, int]:
    """ "IP", "IP:PORT" or "[IPv6]:PORT" -> (ip, port); ValueError names what is wrong."""
    host, port = entry, "53"
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":") or "53"
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{entry!r}: not an IP address (IP, IP:PORT or [IPv6]:PORT)") from None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{entry!r}: port must be 1-65535")
    return str(ip), int(port)


class Settings(Section):
    root: Path = Path()
    newsletter: NewsletterSettings = NewsletterSettings()
    render: RenderSettings = RenderSettings()
    paths: PathSettings = PathSettings()
    lists: dict[str, ListSettings] = Field(default_factory=dict)
    smtp: SmtpSettings = SmtpSettings()
    send: SendSettings = SendSettings()
    dkim: DkimSettings | None = None
    serve: ServeSettings = ServeSettings()
    bounces: BouncesSettings = BouncesSettings()
    outbox: OutboxSettings = OutboxSettings()
    check: CheckSettings = CheckSettings()
    secret: SecretStr | None = None
    smtp_password: SecretStr | None = None
    bounces_password: SecretStr | None = None

    def resolve(self, path: Path) -> Path:
        """A path from the config, made absolute against the project root."""
        return path if path.is_absolute() else self.root / path

    @property
    def issues_dir(self) -> Path:
        return self.resolve(self.paths.issues)

    @property
    def templates_dir(self) -> Path:
        return self.resolve(self.paths.templates)

    @property
    def state_dir(self) -> Path:
        return self.resolve(self.paths.state)

    @property
    def database(self) -> Path:
        """The SQLite outbox file (the default outbox)."""
        url = self.outbox.url
        if url.startswith(SQLITE_SCHEME):
            return self.resolve(Path(url[len(SQLITE_SCHEME) :]))
        return self.state_dir / "outbox.sqlite3"

    @property
    def outbox_target(self) -> Path | str:
        """Where the outbox is: the SQLite file, or the PostgreSQL URL (password included:
        never print it; Outbox.display is the printable form)."""
        url = self.outbox.url
        return url if url.startswith(POSTGRES_SCHEMES) else self.database

    def mailing_list(self, name: str) -> ListSettings:
        try:
            return self.lists[name]
        except KeyError:
            known = ", ".join(sorted(self.lists)) or "none"
            raise ConfigError(
                f"no list named {name!r} in the config (lists: {known})",
                hint=f"Add a [lists.{name}] table with a `path` to newsletter.toml.",
            ) from None


def load_settings(config: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (default ./newsletter.toml, optional) and overlay the environment."""
    env = os.environ if environ is None else environ
    path = config if config is not None else Path(CONFIG_NAME)
    data: dict[str, Any] = {}
    text = ""
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from None
    elif config is not None:
        raise ConfigError(f"{path}: no such config file", hint="Pass an existing file to --config.")
    for key, var in SECRET_ENV.items():
        if key in data:
            raise ConfigError(
                f"{path}: `{key}` must not be stored in the file",
                hint=f"Remove it and set {var} in the environment instead.",
            )
    _refuse_stored_password(data, path)
    _overlay_env(data, env)
    for key, var in SECRET_ENV.items():
        if env.get(var):
            data[key] = env[var]
    data["root"] = path.resolve().parent
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, text)) from None


def _refuse_stored_password(data: dict[str, Any], path: Path) -> None:
    """A database password is a secret too: the URL in the file must not carry one."""
    outbox = data.get("outbox")
    url = outbox.get("url") if isinstance(outbox, dict) else None
    if isinstance(url, str) and url.startswith(POSTGRES_SCHEMES):
        netloc = url.split("://", 1)[1].split("/", 1)[0]
        if ":" in netloc.rpartition("@")[0]:
            raise ConfigError(
                f"{path}: [outbox] url must not hold the database password",
                hint="Remove it from the file; set PGPASSWORD (or ~/.pgpass), or the whole URL"
                " in NEWSLETTER_OUTBOX__URL.",
            )


def _overlay_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX) or "__" not in var[len(ENV_PREFIX) :]:
            continue
        keys = [k.lower() for k in var[len(ENV_PREFIX) :].split("__")]
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{var}: `{key}` is not a table in the config")
            node = child
        node[keys[-1]] = value


def _describe(exc: ValidationError, path: Path, text: str) -> str:
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        line = _line_of(text, [str(p) for p in err["loc"]])
        where = f"{path}:{line}" if line else str(path)
        lines.append(f"{where}: {field}: {err['msg']}")
    return "\n".join(lines)


def _line_of(text: str, loc: list[str]) -> int | None:
    """Best-effort line of `key` under its [table] header, for messages only."""
    if not text or not loc:
        return None
    table, key = ".".join(loc[:-1]), loc[-1]
    current = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1)
            if current == ".".join(loc):
                return number
            continue
        if current == table and re.match(rf"{re.escape(key)}\s*=", line):
            return number
    return None
