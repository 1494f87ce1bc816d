"""A PostgreSQL URL in; the secrets libpq would read from it, and the URL safe to print, out.

libpq takes a password from `user:PASSWORD@` and from the query: `password=`, `sslpassword=`
(the passphrase of the client key), `oauth_client_secret=`, and the `scram_client_key=` and
`scram_server_key=` that log in as well as a password does. It percent-decodes the names as
well as the values (`?pass%77ord=` is a password) and drops spaces around both. It ends the
user name and password at the first `@` before the first `/`, wherever that `@` is: in
`postgresql://db?password=x@y` the "user name" is `db?password=x`. The helpers here read a URL
the same way (tests/test_dburl.py holds them to libpq's own parser), so:

- `redact_url` shows the URL with the password and the value of every query parameter that is not
  a known harmless libpq keyword replaced by `***` (an unknown name may be a misspelt secret);
- `scrub` does the same to a message that may quote those values (libpq's "invalid
  percent-encoded token" quotes the raw value);
- `secret_parameters` names the secrets a URL carries, so newsletter.toml can refuse one;
- `check_unambiguous` refuses the URLs whose `@` libpq would read otherwise than they look
  (part of a password taken for the host name, a query taken for the user name).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

SCHEMES = ("postgresql://", "postgres://")
MASK = "***"
# Every libpq keyword (PQconndefaults) that holds a secret: the '*' ("password field") ones, and
# the SCRAM keys, which libpq marks 'D' (debug) but which log in as a password does.
SECRET_KEYWORDS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)
# The libpq keywords whose values may be shown, plus the two JDBC-style names libpq maps to
# sslmode (`ssl=true`, `requiressl=1`). Any other name's value is masked.
SHOWN_KEYWORDS = frozenset(
    {
        "service",
        "user",
        "passfile",
        "channel_binding",
        "connect_timeout",
        "dbname",
        "host",
        "hostaddr",
        "port",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "sslmode",
        "sslnegotiation",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslcertmode",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "sslkeylogfile",
        "requirepeer",
        "require_auth",
        "min_protocol_version",
        "max_protocol_version",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "replication",
        "target_session_attrs",
        "load_balance_hosts",
        "oauth_issuer",
        "oauth_client_id",
        "oauth_scope",
        "ssl",
        "requiressl",
    }
)


@dataclass(frozen=True)
class _Parameter:
    raw: str  # as written: name=value
    name: str | None  # decoded as libpq decodes it; None where libpq could not
    value: str  # raw, after the first "="
    has_value: bool


@dataclass(frozen=True)
class _Parts:
    """The URL cut where libpq cuts it, every piece raw (as written)."""

    scheme: str
    user: str | None  # None without an `@` before the first `/`
    password: str | None  # None without a `:` before that `@`
    spill: str | None  # the hosts' text before an `@` of theirs: the rest of a password
    hosts: str  # host[:port][,...]
    path: str  # /dbname, or ""
    query: list[_Parameter] | None  # None without `?`

    @property
    def user_is_query(self) -> bool:
        """A `?` in the user name: a query that libpq took for one (`db?password=x@y`)."""
        return self.user is not None and "?" in self.user


def _decode(text: str) -> str | None:
    """libpq's conninfo_uri_decode: spaces around dropped, %XX decoded; None where it fails
    (a space inside, a bad escape, %00)."""
    text = text.strip(" ")
    if " " in text:
        return None
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] != "%":
            out += text[i].encode("utf-8", "surrogateescape")
            i += 1
            continue
        pair = text[i + 1 : i + 3]
        if len(pair) < 2 or any(c not in string.hexdigits for c in pair) or pair == "00":
            return None
        out.append(int(pair, 16))
        i += 3
    return out.decode("utf-8", "replace")


def _split(url: str) -> _Parts | None:
    scheme = next((s for s in SCHEMES if url.startswith(s)), None)
    if scheme is None:
        return None
    rest = url[len(scheme) :]
    user = password = None
    end = next((i for i, ch in enumerate(rest) if ch in "@/"), len(rest))
    if end < len(rest) and rest[end] == "@":
        user, colon, secret = rest[:end].partition(":")
        password = secret if colon else None
        rest = rest[end + 1 :]
    location, mark, params = rest.partition("?")
    hosts, slash, dbname = location.partition("/")
    spill, at, hosts = hosts.rpartition("@")
    query = None
    if mark:
        query = []
        for raw in params.split("&"):
            name, equals, value = raw.partition("=")
            query.append(_Parameter(raw, _decode(name), value, bool(equals)))
    return _Parts(scheme, user, password, spill if at else None, hosts, slash + dbname, query)


def _masked(parameter: _Parameter) -> bool:
    return parameter.has_value and parameter.name not in SHOWN_KEYWORDS


def redact_url(url: str) -> str:
    """`url` with every secret it may carry replaced by ***; anything but a PostgreSQL URL
    (a SQLite path) as it is. Never raises: it is called while reporting errors."""
    parts = _split(url)
    if parts is None:
        return url
    shown = parts.scheme
    if parts.user is not None:
        shown += MASK if parts.user_is_query else parts.user
        shown += f":{MASK}@" if parts.password is not None else "@"
    if parts.spill is not None:
        shown += f"{MASK}@"
    shown += parts.hosts + parts.path
    if parts.query is not None:
        shown += "?" + "&".join(
            p.raw.partition("=")[0] + f"={MASK}" if _masked(p) else p.raw for p in parts.query
        )
    return shown


def _secret_values(parts: _Parts) -> list[str]:
    raws = [parts.password or "", parts.spill or ""]
    raws += [parts.user or ""] if parts.user_is_query else []
    raws += [p.value for p in parts.query or () if _masked(p)]
    values = {v for raw in raws for v in (raw, raw.strip(" "), _decode(raw) or "") if v}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` (a message about connecting to `url`) with the secrets of `url` masked. A very
    short secret masks its letters wherever they are: better a garbled message than a leak."""
    parts = _split(url)
    if parts is None:
        return text
    for value in _secret_values(parts):
        text = text.replace(value, MASK)
    return text


def secret_parameters(url: str) -> list[str]:
    """The secrets `url` carries, by where they are (`user:PASSWORD@`, `sslpassword=`)."""
    parts = _split(url)
    if parts is None:
        return []
    found = ["user:PASSWORD@"] if (parts.password or "").strip(" ") else []
    for parameter in parts.query or ():
        if parameter.name in SECRET_KEYWORDS and parameter.value.strip(" "):
            found.append(f"{parameter.name}=")
    return list(dict.fromkeys(found))


def check_unambiguous(url: str) -> str:
    """`url`, if libpq reads its `@` where it seems to be; else ValueError saying what to fix.
    libpq would otherwise take part of a password for the host name (and print it in its
    error), or a query for the user name."""
    parts = _split(url)
    if parts is None:
        return url
    if parts.user is not None and "?" in parts.user + (parts.password or ""):
        raise ValueError(
            "has an @ after its ?, and libpq reads everything before that @ as the user name"
            " and password: write @ in a query value as %40 (and ? in a password as %3F)"
        )
    if parts.spill is not None:
        raise ValueError(
            "has more than one @ before the database name, and libpq would read the part"
            " after the first one as the host: write @ in the user name or password as %40"
        )
    return url
