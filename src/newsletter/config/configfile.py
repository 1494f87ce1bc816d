"""newsletter.toml and the NEWSLETTER_* environment in; the raw table to validate out, and
validation errors described by where each value came from (a file line or a variable).

Any key can be overridden as NEWSLETTER_<TABLE>__<KEY>. Secrets come only from the environment:
one stored in the file is an error (a database password in [outbox] url too, in whatever form
libpq would read it), and so is a variable whose name or value is not UTF-8. No value may hold a
word filled per reader (`__NL_…`). Each fault names where it came from: the file's line, or the
variable.

The project's secret has a second source, read only when NEWSLETTER_SECRET is unset: the
private file `.newsletter/secret` under the project root, which `newsletter init` writes (0600,
ignored by git), so a new project sends with no export; the environment still wins.
"""

from __future__ import annotations

import contextlib
import json
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from newsletter.config.dburl import secret_parameters
from newsletter.errors import ConfigError, display_path
from newsletter.fields import check_placeholders
from newsletter.state.statefiles import private_file

ENV_PREFIX = "NEWSLETTER_"
SECRET_ENV = {
    "secret": "NEWSLETTER_SECRET",
    # Earlier values of NEWSLETTER_SECRET, comma-separated: their tokens still verify.
    "secret_previous": "NEWSLETTER_SECRET_PREVIOUS",
    "smtp_password": "NEWSLETTER_SMTP_PASSWORD",
    "bounces_password": "NEWSLETTER_BOUNCES_PASSWORD",
    # Provider webhooks (web/site/hooks.py): a provider's route answers only once its is set.
    "webhook_sendgrid_key": "NEWSLETTER_WEBHOOK_SENDGRID_KEY",
    "webhook_resend_secret": "NEWSLETTER_WEBHOOK_RESEND_SECRET",
    "webhook_mailgun_key": "NEWSLETTER_WEBHOOK_MAILGUN_KEY",
    "webhook_postmark_password": "NEWSLETTER_WEBHOOK_POSTMARK_PASSWORD",
}
CONFIG_NAME = "newsletter.toml"
# The project's secret when NEWSLETTER_SECRET is not set, relative to the project root. Not
# under [paths] state: the secret belongs to the project, and a state folder moved elsewhere
# (or shared by several projects) must not change which key signs its links.
SECRET_FILE = Path(".newsletter") / "secret"
# Shorter secrets are refused, from the environment or the file (mail/tokens.py's keys).
MIN_SECRET_LENGTH = 16
SQLITE_SCHEME = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class RawConfig:
    data: dict[str, Any]
    path: Path
    text: str
    sources: dict[tuple[str, ...], str]  # which variable set which key

    def error(self, exc: ValidationError) -> ConfigError:
        """One line per error: `file:line: field: reason`, or `VARIABLE: field: reason`."""
        return _error(_describe(exc, self.path, self.text, self.sources), self.sources)


def read_config(
    config: Path | None,
    env: Mapping[str, str],
    tables: Collection[str] = (),
    is_list: Callable[[tuple[str, ...]], bool] = lambda keys: False,
) -> RawConfig:
    """The file's table with the environment laid over it, and the project root set.

    `tables` are the config's table names: a variable that names one with a single underscore
    (NEWSLETTER_SMTP_HOST) is a typo of NEWSLETTER_SMTP__HOST, refused rather than ignored.
    `is_list(keys)` says whether the setting at `keys` is a list: a variable setting one holds a
    JSON array or comma-separated values (NEWSLETTER_CHECK__NAMESERVERS=10.0.0.2,10.0.0.3)."""
    _refuse_single_underscore(env, tables)
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
    _refuse_stored_password(data, path, text)
    sources = _overlay_env(data, env, is_list)
    _refuse_placeholders(data, path, text, sources)
    for key, var in SECRET_ENV.items():
        if env.get(var):
            data[key] = _text(var, env[var])
            sources[(key,)] = var
    data["root"] = path.resolve().parent
    if "secret" not in data:
        stored = read_secret_file(data["root"] / SECRET_FILE)
        if stored is not None:
            data["secret"] = stored
    return RawConfig(data, path, text, sources)


def read_secret_file(path: Path) -> str | None:
    """The secret kept in `path` (surrounding whitespace dropped), None if there is no such
    file; ConfigError naming the file if it cannot be read or is not a usable secret. The
    value itself is never part of a message."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(
            f"{display_path(path)}: cannot read the project's secret: {reason}",
            hint="Make it readable by this user (it is 0600, its owner's), or set"
            " NEWSLETTER_SECRET in the environment instead.",
        ) from None
    # Found readable by other users (a copy from a backup, a chmod): they lose that access, as
    # every state file does when found (statefiles.py); the group keeps its for `serve`.
    private_file(path)
    if len(value) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"{display_path(path)}: the project's secret is too short ({len(value)} characters;"
            f" at least {MIN_SECRET_LENGTH})",
            hint="Put back the value from your backup: every unsubscribe and click link already"
            " sent was signed with it. A project that has sent nothing may take a new one:"
            " python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > .newsletter/secret",
        )
    return value


def _refuse_stored_password(data: dict[str, Any], path: Path, text: str) -> None:
    """A database password is a secret too: the URL in the file must carry none, in any of the
    forms libpq reads (`user:PW@`, `?password=`, `?sslpassword=`, ...; see dburl.py)."""
    outbox = data.get("outbox")
    url = outbox.get("url") if isinstance(outbox, dict) else None
    found = secret_parameters(url) if isinstance(url, str) else []
    if found:
        line = _line_of(text, ["outbox", "url"])
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f"{where}: outbox.url: must not hold the database password or another secret"
            f" (it has {', '.join(found)})",
            hint="Remove it from the file; set PGPASSWORD (or ~/.pgpass), or the whole URL"
            " in NEWSLETTER_OUTBOX__URL.",
        )


def _refuse_placeholders(
    data: dict[str, Any], path: Path, text: str, sources: Mapping[tuple[str, ...], str]
) -> None:
    """No key or value of the config may hold a word filled per reader (`__NL_NAME__`): the
    sender's name, a list's name or base_url would carry each reader's unsubscribe link or
    name into every message, the way a link in an issue file would (see fields.py)."""
    problems = []
    for loc, value in _strings(data, ()):
        try:
            check_placeholders(value)
        except ValueError as exc:
            keys = [str(k) for k in loc if isinstance(k, str)]
            line = _line_of(text, keys)
            where = _source_of(loc, sources) or (f"{path}:{line}" if line else str(path))
            problems.append(f"{where}: {_field(loc)}: {exc}")
    if problems:
        raise _error(problems, sources)


def _strings(node: Any, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every key and text value under `node`, with where it is; the secrets left out (they
    never reach a message, and must not be printed)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(node, dict):
        for key, child in node.items():
            if not loc and key in SECRET_ENV:
                continue
            found.append(((*loc, key), str(key)))
            found += _strings(child, (*loc, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _strings(child, (*loc, index))
    elif isinstance(node, str):
        found.append((loc, node))
    return found


def _name(var: str) -> str:
    """The variable's name; Python hands undecodable bytes in it over as surrogates, which
    would reach the config as a key no message could print."""
    try:
        var.encode("utf-8")
    except UnicodeEncodeError:
        shown = var.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
        raise ConfigError(
            f"{shown}: the variable's name is not valid UTF-8 text",
            hint="Unset it; settings are named NEWSLETTER_<TABLE>__<KEY> in ASCII, e.g."
            " NEWSLETTER_SMTP__HOST.",
        ) from None
    return var


def _text(var: str, value: str) -> str:
    """The variable's value; Python hands undecodable bytes over as surrogates, which would
    fail much later (when a secret is encoded) with a traceback."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{var}: the value is not valid UTF-8 text",
            hint=f"Set {var} again, as UTF-8 (for a secret: a long random ASCII value).",
        ) from None
    return value


def _refuse_single_underscore(env: Mapping[str, str], tables: Collection[str]) -> None:
    """An override with one underscore after its table would otherwise be silently unused: the
    send would go to the file's server while the operator believes it goes to theirs."""
    for var in env:
        rest = var[len(ENV_PREFIX) :].lower() if var.startswith(ENV_PREFIX) else ""
        if not rest or "__" in rest or var in SECRET_ENV.values():
            continue
        table, _, key = rest.partition("_")
        if key and table in tables and table not in SECRET_ENV and table != "root":
            fixed = f"{ENV_PREFIX}{table.upper()}__{key.upper()}"
            raise ConfigError(
                f"{_name(var)}: not a setting (one underscore between table and key)",
                hint=f"Name it {fixed}, or unset it.",
            )


def _overlay_env(
    data: dict[str, Any], env: Mapping[str, str], is_list: Callable[[tuple[str, ...]], bool]
) -> dict[tuple[str, ...], str]:
    """Put every NEWSLETTER_<TABLE>__<KEY> into `data`; returns which variable set which key."""
    sources: dict[tuple[str, ...], str] = {}
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX) or "__" not in var[len(ENV_PREFIX) :]:
            continue
        keys = [k.lower() for k in _name(var)[len(ENV_PREFIX) :].split("__")]
        if "" in keys:
            raise ConfigError(
                f"{var}: the name has an empty key (two __ in a row, or __ at an end)",
                hint="Name it NEWSLETTER_<TABLE>__<KEY>, e.g. NEWSLETTER_SMTP__HOST, or unset it.",
            )
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{var}: `{key}` is not a table in the config")
            node = child
        text = _text(var, value)
        node[keys[-1]] = _list(text) if is_list(tuple(keys)) else text
        sources[tuple(keys)] = var
    return sources


def _list(text: str) -> list[Any]:
    """A list setting's variable: a JSON array as pydantic-settings reads one, else values
    separated by commas ("[::1]:53" is no JSON, so it is one value)."""
    if text.lstrip().startswith("["):
        with contextlib.suppress(json.JSONDecodeError):
            found = json.loads(text)
            if isinstance(found, list):
                return found
    return [part.strip() for part in text.split(",") if part.strip()]


def _error(lines: list[str], sources: Mapping[tuple[str, ...], str]) -> ConfigError:
    """The lines as one error; its hint names the file only when a line is about the file."""
    variables = set(sources.values())
    if all(line.partition(":")[0] in variables for line in lines):
        return ConfigError(
            "\n".join(lines), hint="Fix or unset the NEWSLETTER_* variable named above."
        )
    return ConfigError("\n".join(lines))


def _describe(
    exc: ValidationError, path: Path, text: str, sources: Mapping[tuple[str, ...], str]
) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        line = _line_of(text, list(loc))
        # A table only a variable made (NEWSLETTER_BOGUS__X makes [bogus]) is that variable's.
        var = _source_of(loc, sources) or (None if line else _source_below(loc, sources))
        where = var or (f"{path}:{line}" if line else str(path))
        lines.append(f"{where}: {_field(loc)}: {_message(err)}")
    return lines


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "is not a known setting (check its spelling)"
    return str(err["msg"]).removeprefix("Value error, ")


def _field(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _source_of(loc: tuple[str | int, ...], sources: Mapping[tuple[str, ...], str]) -> str | None:
    """The variable that set the value at `loc`, or the table above it."""
    keys = tuple(str(p) for p in loc)
    return next(
        (sources[keys[:end]] for end in range(len(keys), 0, -1) if keys[:end] in sources), None
    )


def _source_below(loc: tuple[str, ...], sources: Mapping[tuple[str, ...], str]) -> str | None:
    """A variable that set a key somewhere below `loc`."""
    return next((var for keys, var in sources.items() if keys[: len(loc)] == loc), None)


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
