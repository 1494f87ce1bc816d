"""newsletter.toml and the NEWSLETTER_* environment in; the raw table to validate out, and
validation errors described by where each value came from (a file line or a variable).

Any key can be overridden as NEWSLETTER_<TABLE>__<KEY>. Secrets come only from the environment:
one stored in the file is an error, and so is a variable whose value is not UTF-8.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from newsletter.errors import ConfigError

ENV_PREFIX = "NEWSLETTER_"
SECRET_ENV = {
    "secret": "NEWSLETTER_SECRET",
    # Earlier values of NEWSLETTER_SECRET, comma-separated: their tokens still verify.
    "secret_previous": "NEWSLETTER_SECRET_PREVIOUS",
    "smtp_password": "NEWSLETTER_SMTP_PASSWORD",
    "bounces_password": "NEWSLETTER_BOUNCES_PASSWORD",
}
CONFIG_NAME = "newsletter.toml"
SQLITE_SCHEME = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class RawConfig:
    data: dict[str, Any]
    path: Path
    text: str
    sources: dict[tuple[str, ...], str]  # which variable set which key

    def describe(self, exc: ValidationError) -> str:
        """One line per error: `file:line: field: reason`, or `VARIABLE: field: reason`."""
        return _describe(exc, self.path, self.text, self.sources)


def read_config(config: Path | None, env: Mapping[str, str]) -> RawConfig:
    """The file's table with the environment laid over it, and the project root set."""
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
    sources = _overlay_env(data, env)
    for key, var in SECRET_ENV.items():
        if env.get(var):
            data[key] = _text(var, env[var])
            sources[(key,)] = var
    data["root"] = path.resolve().parent
    return RawConfig(data, path, text, sources)


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


def _overlay_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Put every NEWSLETTER_<TABLE>__<KEY> into `data`; returns which variable set which key."""
    sources: dict[tuple[str, ...], str] = {}
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
        node[keys[-1]] = _text(var, value)
        sources[tuple(keys)] = var
    return sources


def _describe(
    exc: ValidationError, path: Path, text: str, sources: Mapping[tuple[str, ...], str]
) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        field = ".".join(loc)
        var = next(
            (sources[loc[:end]] for end in range(len(loc), 0, -1) if loc[:end] in sources), None
        )
        line = _line_of(text, list(loc))
        where = var or (f"{path}:{line}" if line else str(path))
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {field}: {message}")
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
