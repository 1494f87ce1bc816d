"""newsletter.toml + NEWSLETTER_* environment variables -> one typed, validated Settings.

Any key can be overridden from the environment as NEWSLETTER_<SECTION>__<KEY> (for example
NEWSLETTER_SMTP__PORT=2525, NEWSLETTER_LISTS__MAIN__PATH=all.csv). Secrets come only from the
environment (NEWSLETTER_SECRET, NEWSLETTER_SECRET_PREVIOUS, NEWSLETTER_SMTP_PASSWORD), are held as
SecretStr and never printed.
Relative paths in the file are relative to the file's folder, the project root.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import os
import re
import typing
import zoneinfo
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from newsletter.config.configfile import POSTGRES_SCHEMES, SQLITE_SCHEME, read_config
from newsletter.config.dburl import check_unambiguous
from newsletter.days import date_of, zone_named
from newsletter.errors import ConfigError
from newsletter.fields import DEFAULT_LIST as DEFAULT_LIST
from newsletter.i18n import translation_problem


class SettingsTable(BaseModel):
    """A table of newsletter.toml: frozen, and a key it does not know is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


_LANGUAGE_TAG = re.compile(r"[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def check_language(value: str) -> str:
    """A BCP 47 language tag: it goes into `lang=` and the Content-Language header."""
    if not _LANGUAGE_TAG.fullmatch(value):
        raise ValueError(f"{value!r} is not a language tag such as en or zh-CN")
    return value


def check_newsletter_language(value: str) -> str:
    """The newsletter's language: a tag whose words (i18n.TRANSLATED) the tool has, never one it
    would quietly show in English."""
    problem = translation_problem(check_language(value))
    if problem is not None:
        raise ValueError(problem)
    return value


def check_greeting(value: str) -> str:
    """A greeting is one line: a line break or control character would break the email's."""
    if any(ord(char) < 32 or 127 <= ord(char) < 160 for char in value):
        raise ValueError(f"{value!r} must be one line without control characters")
    return value


def check_mailbox(value: str) -> str:
    """One address at most (`Name <a@example.org>`); a second would be silently dropped."""
    if value and len(email.utils.getaddresses([value])) > 1:
        raise ValueError(
            f"{value!r} names more than one address; give one "
            '(a name with a comma goes in double quotes: "Chen, Alice" <a@example.org>)'
        )
    return value


def check_base_url(value: str) -> str:
    """Where `serve` is reachable: every unsubscribe and web link starts with it."""
    parts = urlsplit(value)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or re.search(r"[\s\x00-\x1f\x7f\"<>\\]", value)
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ValueError(
            f"{value!r} must be an http:// or https:// address with a host and no query, "
            'e.g. "https://news.example.org"'
        )
    return value


def check_timezone(value: str) -> str:
    """An IANA time zone name; empty means the machine's."""
    if value:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"{value!r} is not a time zone such as Asia/Shanghai or Europe/Berlin"
            ) from None
    return value


class NewsletterSettings(SettingsTable):
    name: str = "Newsletter"
    language: Annotated[str, AfterValidator(check_newsletter_language)] = "en"
    sender: Annotated[str, AfterValidator(check_mailbox)] = "Newsletter <newsletter@example.org>"
    reply_to: Annotated[str, AfterValidator(check_mailbox)] = ""  # the Reply-To header, if any
    # The mailto: in List-Unsubscribe (default: the sender); the token rides in its subject.
    unsubscribe_email: Annotated[str, AfterValidator(check_mailbox)] = ""
    base_url: Annotated[str, AfterValidator(check_base_url)] = "http://127.0.0.1:8025"
    # The line above each issue's intro, `{name}` the reader's name: "auto" (the language's
    # words, "Hi {name},", unless the intro opens with a greeting of its own), "" for none, or
    # the editor's own ("Dear {name},"). An issue's `greeting:` overrides it.
    greeting: Annotated[str, AfterValidator(check_greeting)] = "auto"
    # The name the greeting gives a reader the list has no name for ("Hi friend,"), and the one
    # the web archive's copy of an issue greets.
    greeting_fallback: str = "friend"
    # The name of the sample reader `preview` and `build` fill each issue for.
    sample_name: str = "Sample Reader"
    # The sample reader's address, in its To: and its links (no mail is sent to it).
    sample_email: str = "reader@example.org"
    # Where the newsletter's days begin and end (Asia/Shanghai); empty: the machine's zone.
    timezone: Annotated[str, AfterValidator(check_timezone)] = ""

    def today(self) -> dt.date:
        """The newsletter's date now: in its time zone, else the machine's."""
        return self.date_of(dt.datetime.now(dt.UTC))

    def date_of(self, moment: dt.datetime) -> dt.date:
        """The newsletter's date at `moment` (without a zone: UTC, as the outbox stores
        times): in its time zone, else the machine's."""
        return date_of(moment, zone_named(self.timezone))


class RenderSettings(SettingsTable):
    # What inlines the CSS into the HTML part: css-inline (fast, the default) or premailer.
    inliner: Literal["css-inline", "premailer"] = "css-inline"
    # Section and item numbers: "chinese" (一、, and items from 0、), "decimal" (from 1), "none";
    # "auto" is chinese for a Chinese newsletter, none otherwise (an English weekly that numbers
    # nothing gets no numbers; "decimal" forces them). An issue's `numbering:` wins, and an
    # issue whose titles carry their own numbers gets none added.
    numbering: Literal["auto", "chinese", "decimal", "none"] = "auto"


class PathSettings(SettingsTable):
    issues: Path = Path("issues")  # the issue files, N.yaml or N.md
    templates: Path = Path("templates/email")  # the email templates (the package's if absent)
    state: Path = Path(".newsletter")  # the outbox, the secret, the build: private, out of git


class ListSettings(SettingsTable):
    # The list's CSV, if it has one: its recipients are the CSV's rows plus the list's confirmed
    # subscribers in the outbox (signups, imports, `newsletter subscribers add`).
    path: Path | None = None
    name: str = ""  # the list's name, as readers see it (signup, preferences)
    id: str = ""  # the List-Id header mail clients file the newsletter by
    staging: bool = False  # a test list: `send --list` sends to it only, again after each change
    signup: bool = False  # readers may sign up on `newsletter serve`'s signup page


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)\s*([dhms]))", re.IGNORECASE)
_UNIT = {"d": 86_400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: object) -> object:
    """ "6h", "90m", "1d12h", "45s" (or a number of seconds) -> seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip().replace(" ", "")
    if text and re.fullmatch(f"{_DURATION.pattern}+", text, re.IGNORECASE):
        return sum(float(n) * _UNIT[u.lower()] for n, u in _DURATION.findall(text))
    raise ValueError(f"{value!r} is not a duration such as 6h, 90m, 1d12h or 3600 (seconds)")


Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]


_RELAY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def check_relay_name(value: str) -> str:
    """A relay's name: stored on each delivery row and printed by `status`."""
    if not _RELAY_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a relay name: lowercase letters, digits, - and _ (e.g. backup)"
        )
    return value


def route_domains(value: list[str]) -> list[str]:
    """Recipient domains as written -> lower case, no trailing dot; a bad one named."""
    domains = []
    for entry in value:
        domain = entry.strip().lower().rstrip(".")
        if not re.fullmatch(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", domain) or "." not in domain:
            raise ValueError(f"{entry!r} is not a recipient domain such as outlook.com")
        domains.append(domain)
    return domains


class RelaySettings(SettingsTable):
    """[smtp.relays.NAME]: one more relay, tried after [smtp]'s own in the order written. What
    it leaves out (timeout, verify, ca_file, messages_per_connection, pipelining) is [smtp]'s."""

    host: str
    port: Annotated[int, Field(ge=1, le=65535)] = 587
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str = ""
    # The environment variable holding this relay's password: never the password itself.
    password_env: str = ""
    verify: bool | None = None
    ca_file: Path | None = None
    timeout: Annotated[float, Field(gt=0)] | None = None
    messages_per_connection: Annotated[int, Field(ge=1)] | None = None
    pipelining: bool | None = None
    # Recipients at these domains go through this relay first (a route), e.g. Microsoft's.
    domains: list[str] = Field(default_factory=list)
    # Filled by load_settings from `password_env`; a file that sets it is refused there.
    password: SecretStr | None = None

    @field_validator("password_env")
    @classmethod
    def _variable(cls, value: str) -> str:
        if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(
                f"{value!r} is not an environment variable name"
                " (e.g. NEWSLETTER_SMTP_BACKUP_PASSWORD)"
            )
        return value

    @field_validator("domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return route_domains(value)


class SmtpSettings(SettingsTable):
    # The mail server the issues go out through (the default: `newsletter mailbox`, the local
    # capture server, which delivers nothing).
    host: str = "127.0.0.1"
    # Its port: 587 (STARTTLS) or 465 (TLS) at a provider; 1025 is `newsletter mailbox`'s.
    port: Annotated[int, Field(ge=1, le=65535)] = 1025
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str = ""
    verify: bool = True  # TLS certificates are verified by default
    ca_file: Path | None = None  # optional: a CA to trust besides the system's
    timeout: Annotated[float, Field(gt=0)] = 30.0  # seconds, to connect and per SMTP command
    # Then the session is closed and a new one opened.
    messages_per_connection: Annotated[int, Field(ge=1)] = 50
    # MAIL, RCPT and DATA in one write when the server offers PIPELINING (RFC 2920); false for
    # a server that offers it and gets it wrong.
    pipelining: bool = True
    # The name [smtp]'s own relay goes by (on each delivery row, in `status`), and the relays
    # tried after it, in the order written ([smtp.relays.NAME] tables; see docs/guide/relays.md).
    name: Annotated[str, AfterValidator(check_relay_name)] = "primary"
    # The relays tried after [smtp]'s own, in the order written, each a [smtp.relays.NAME] table.
    relays: dict[str, RelaySettings] = Field(default_factory=dict)
    # A relay that fails this many sessions or messages in a row (unreachable, 421, its own 4xx)
    # is set aside for `set_aside` (a duration) and its mail goes through the next one.
    set_aside_after: Annotated[int, Field(ge=1, le=100)] = 3
    # How long a relay set aside rests before it is tried again (a duration: 300, 5m).
    set_aside: Duration = 300.0

    @field_validator("relays")
    @classmethod
    def _relays(
        cls, value: dict[str, RelaySettings], info: ValidationInfo
    ) -> dict[str, RelaySettings]:
        routed: dict[str, str] = {}
        for name, relay in value.items():
            check_relay_name(name)
            if name == info.data.get("name"):
                raise ValueError(
                    f"{name!r} is [smtp]'s own relay (its `name`); give the table another name"
                )
            for domain in relay.domains:
                if domain in routed:
                    raise ValueError(
                        f"{domain} is routed through both {routed[domain]} and {name};"
                        " name it in one relay's domains only"
                    )
                routed[domain] = name
        return value

    def relay(self, name: str) -> SmtpSettings:
        """The settings a session to relay `name` opens with: [smtp]'s, with the relay's own
        keys over them (and no relays of its own)."""
        if name == self.name:
            return self.model_copy(update={"relays": {}})
        relay = self.relays[name]
        own = relay.model_dump(exclude={"domains", "password", "password_env"}, exclude_none=True)
        return self.model_copy(update={**own, "name": name, "relays": {}})


class SendSettings(SettingsTable):
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4  # SMTP sessions at once (--concurrency)
    rate: Annotated[float, Field(ge=0)] = 0.0  # messages per second, 0 = unlimited (--rate)
    rate_per_hour: Annotated[int, Field(ge=0)] = 0  # messages per hour, 0 = unlimited
    max_attempts: Annotated[int, Field(ge=1)] = 5  # tries per recipient and run (temporary faults)
    # The first retry after up to this many seconds, doubling (full jitter) up to retry_cap.
    retry_base: Annotated[float, Field(gt=0)] = 1.0
    retry_cap: Annotated[float, Field(gt=0)] = 60.0  # the longest wait between two retries
    breaker_threshold: Annotated[int, Field(ge=1)] = 5  # connection failures in a row: stop
    # Worker processes sharing the connections; > 1 only pays off when a fast server makes the
    # send CPU-bound (see benchmarks/send.py).
    processes: Annotated[int, Field(ge=1, le=16)] = 1
    # Seconds a worker's claim on its rows lasts without renewal (renewed every third of it);
    # after it a dead worker's rows go back to the others (see "Scaling out").
    lease: Annotated[float, Field(ge=1, le=3600)] = 30.0
    # A new sending domain's daily cap (docs/guide/relays.md, "Warm-up"): "off", "standard"
    # (Ghost's ramp: 200 the first day to 200,000 on day 41), or the editor's own caps by day.
    warmup: Literal["off", "standard"] | list[Annotated[int, Field(ge=1)]] = "off"
    # Day 0 of the ramp; unset: the day of the first message the delivery log shows sent.
    warmup_start: dt.date | None = None

    @field_validator("warmup")
    @classmethod
    def _ramp(cls, value: str | list[int]) -> str | list[int]:
        if isinstance(value, list) and not value:
            raise ValueError('an empty list caps nothing: give daily caps, "standard" or "off"')
        return value


class DkimSettings(SettingsTable):
    domain: str  # the signing domain (d=), the sender's or its parent
    selector: str  # the selector (s=): the key is published at SELECTOR._domainkey.DOMAIN
    private_key: Path  # the RSA private key, PEM
    # Optional Ed25519 (RFC 8463) signature beside the RSA one, under its own selector.
    ed25519_key: Path | None = None
    ed25519_selector: str = ""  # the Ed25519 key's selector


def ip_networks(entries: list[str]) -> list[str]:
    """Networks as written ("10.1.0.0/16", "192.168.1.5", "fd00::/8") -> their canonical form;
    ValueError names the entry that is not one."""
    networks = []
    for entry in entries:
        try:
            networks.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
        except ValueError:
            raise ValueError(
                f"{entry!r}: not an IP network (e.g. 10.1.0.0/16, 192.168.1.5, fd00::/8)"
            ) from None
    return networks


def check_nameservers(entries: list[str]) -> list[str]:
    for entry in entries:
        nameserver_address(entry)
    return entries


# DNS servers to ask instead of the system's resolver: "IP", "IP:PORT" or "[IPv6]:PORT".
Nameservers = Annotated[list[str], AfterValidator(check_nameservers)]


class WebhooksSettings(SettingsTable):
    """[webhooks]: providers' bounce and complaint events at POST /webhooks/PROVIDER. The keys
    and secrets come from the environment only (NEWSLETTER_WEBHOOK_SENDGRID_KEY, ..._RESEND_SECRET,
    ..._MAILGUN_KEY, ..._POSTMARK_PASSWORD); a provider without one answers 404."""

    # A signed request whose timestamp is further than this from our clock is refused (replay).
    tolerance_seconds: Annotated[int, Field(ge=30, le=3600)] = 300
    # The basic-auth user name Postmark's webhook URL carries (Postmark does not sign).
    postmark_user: str = "postmark"
    # The relay the send goes through: each message then carries the header that makes it
    # echo the row's signed tag in its events (X-SMTPAPI, X-PM-Metadata-newsletter_tag,
    # X-Mailgun-Variables, X-SES-MESSAGE-TAGS). "" adds nothing.
    relay: Literal["", "sendgrid", "postmark", "mailgun", "ses", "resend"] = ""
    # The SNS topics (ARNs) SES publishes bounces and complaints to: /webhooks/ses answers
    # only these, and confirms a subscription only to one of them.
    ses_topics: tuple[str, ...] = ()


class ServeSettings(SettingsTable):
    # Where `newsletter serve` listens, behind the TLS proxy at base_url.
    host: str = "127.0.0.1"
    # The port it listens on there (0 picks a free one).
    port: Annotated[int, Field(ge=0, le=65535)] = 8025
    # The web archive shows only the issues "sent" to a subscriber list (a draft stays private;
    # a staging send makes its page reachable, not listed), or "all" issue files. "sent" by
    # default: `newsletter new`'s empty draft was public at once (issue 29).
    publish: Literal["all", "sent"] = "sent"
    # Seconds a request's head may take to arrive, and then its body: a client that sends it a
    # byte at a time is cut off (see web/site/deadlines.py).
    timeout: Annotated[float, Field(gt=0, le=300)] = 10.0
    # Connections open at once; one more closes the one that has waited longest for a request.
    max_connections: Annotated[int, Field(ge=1, le=100_000)] = 1000
    # The proxies whose X-Forwarded-For is believed (networks: "10.0.0.0/8", "::1"); the
    # client's address is read right to left through them. Default: a proxy on this host.
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1/32", "::1/128"])

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: list[str]) -> list[str]:
        return ip_networks(value)


class SignupSettings(SettingsTable):
    """Signup: its defences, its links and its mail (see the guide's "Readers join")."""

    # Proof of work (ALTCHA, PBKDF2/SHA-256): iterations per try; a browser makes ~256 tries.
    work_cost: Annotated[int, Field(ge=100, le=1_000_000)] = 5000
    challenge_expiry: Annotated[float, Field(ge=30, le=3600)] = 600.0  # seconds
    # Token buckets: sustained signups per minute and the burst, per client and for the site.
    per_client_per_minute: Annotated[float, Field(gt=0)] = 5.0
    per_client_burst: Annotated[int, Field(ge=1)] = 5  # a client's burst (IPv6: per /64)
    site_per_minute: Annotated[float, Field(gt=0)] = 120.0  # sustained for the whole site
    site_burst: Annotated[int, Field(ge=1)] = 60  # the whole site's burst
    # At most one confirmation mail per mailbox in this many hours, whatever is posted.
    confirmation_window: Annotated[float, Field(gt=0, le=24 * 30)] = 24.0
    # The domain check: MX or A/AAAA records looked up (false: syntax and the lists only),
    # through these nameservers ("IP" or "IP:PORT"; empty: the system's resolver).
    check_dns: bool = True
    nameservers: Nameservers = Field(default_factory=list)  # the domain check's ("IP", "IP:PORT")
    dns_timeout: Annotated[float, Field(gt=0, le=30)] = 3.0  # seconds per lookup
    refuse_disposable: bool = True  # domains on the disposable-email-domains list
    blocked_domains: list[str] = Field(default_factory=list)  # and any others (subdomains too)
    # Hours a confirmation (or address-change) link works.
    confirm_expiry: Annotated[float, Field(gt=0, le=24 * 30)] = 48.0
    # One fixed welcome mail (templates/email/welcome.*) once a reader confirms; a welcome
    # sequence (sequences/) is the editorial one (docs: Signup, "Two welcome mails").
    welcome: bool = False
    # What the form says the reader agrees to (default: the page's own words, in the
    # newsletter's language), and its version: the consent ledger keeps both's record.
    consent_text: str = ""
    # Kept with each signup; raise it when consent_text changes.
    consent_version: Annotated[str, Field(min_length=1, max_length=40)] = "1"

    @field_validator("blocked_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return [d.strip().lower().rstrip(".") for d in value if d.strip()]


class BouncesSettings(SettingsTable):
    # VERP: each message's envelope sender becomes bounces+TAG@domain when this is set.
    return_path: str = ""
    # imaps://user@host[:port]/FOLDER; the password comes from NEWSLETTER_BOUNCES_PASSWORD.
    imap: str = ""
    ca_file: Path | None = None  # a CA to trust besides the system's
    timeout: Annotated[float, Field(gt=0)] = 30.0  # seconds, for connecting and each IMAP command
    # Understood reports are moved to this folder; "" flags them (Seen and a keyword) instead.
    processed: str = "Newsletter-Processed"
    soft_limit: Annotated[int, Field(ge=1)] = 3  # soft bounces in a row that suppress
    # A send stops (exit 4) when this run's hard bounces pass this share of its answered
    # messages (5 %), once it has min_sample of them.
    max_hard_rate: Annotated[float, Field(ge=0, le=1)] = 0.05
    # A send stops (exit 4) when this run's complaints pass this share of its answered
    # messages (0.1 %), once it has min_sample of them.
    max_complaint_rate: Annotated[float, Field(ge=0, le=1)] = 0.001
    min_sample: Annotated[int, Field(ge=1)] = 100  # attempts before the rates apply


class TrackingMode(StrEnum):
    """How much a click keeps, least first: the one name of [tracking] clicks' values, used by
    the render, the redirect, the report and the delivery log (which stores the value)."""

    OFF = "off"  # links go straight to their sites
    AGGREGATE = "aggregate"  # counts per link, nothing about a person kept
    PER_READER = "per-reader"  # counts per reader, by outbox row

    @classmethod
    def stored(cls, value: str | None) -> TrackingMode:
        """A mode as the log or a token stored it; anything else (a newer version's) is off."""
        try:
            return cls(value or "off")
        except ValueError:
            return cls.OFF

    @classmethod
    def least(cls, *modes: TrackingMode) -> TrackingMode:
        """The mode that keeps least of `modes`."""
        return min(modes, key=list(cls).index)


class TrackingSettings(SettingsTable):
    """What readers read (the guide's page of that name): off unless turned on."""

    # "off": links go straight to their sites; "aggregate": counts per link, nothing about a
    # person kept; "per-reader": counts per reader, by outbox row.
    clicks: TrackingMode = TrackingMode.OFF
    # Seconds: a request this soon after that recipient's delivery, within this of the same
    # message's canary request, or this close to a request for another link of it, is a machine.
    delivery_window: Annotated[float, Field(ge=0, le=3600)] = 10.0
    canary_window: Annotated[float, Field(ge=0, le=3600)] = 10.0  # from its canary request
    burst_window: Annotated[float, Field(ge=0, le=3600)] = 2.0  # from another of its links


class PrivacySettings(SettingsTable):
    # A count below this is shown as "< 5" in every report (text, CSV, HTML, charts).
    min_count: Annotated[int, Field(ge=1, le=1000)] = 5
    retention_days: Annotated[int, Field(ge=1)] = 180  # click events older than this are deleted
    # Bounce reports held for review (a stranger's sender and words) are deleted this many days
    # after they were held, or after the editor accepted or dismissed them.
    held_retention_days: Annotated[int, Field(ge=1)] = 90
    # A recorded bounce report keeps the server's text (a diagnostic that often names the
    # address) this many days; then only its kind and status, which the counts are made of.
    bounce_text_days: Annotated[int, Field(ge=1)] = 90
    # The address a click came from: "truncate" keeps its network (IPv4 /24, IPv6 /48), "hash"
    # a keyed digest that changes every day, "none" nothing.
    ip: Literal["truncate", "hash", "none"] = "truncate"
    # The address a signup, a confirmation or a preference change came from, in the consent
    # ledger: "keep" it whole (what proves consent best), or as `ip` says ("truncate", "hash",
    # "none"); unset, as `ip`.
    consent_ip: Literal["keep", "truncate", "hash", "none"] | None = None


class OutboxSettings(SettingsTable):
    # "" is the SQLite file outbox.sqlite3 in [paths] state; `sqlite:///FILE` another file
    # (relative to the project root); `postgresql://USER@HOST:PORT/DB` a shared PostgreSQL.
    url: str = ""
    # What a commit survives: "process" (this process killed: SQLite synchronous=NORMAL,
    # PostgreSQL synchronous_commit=off) or "power" (a power cut: FULL, on); see "Durability".
    durability: Literal["process", "power"] = "process"
    # SQLite: how long, in seconds, a write waits for another program's write lock (a sqlite3
    # shell, a backup) before the run stops, resumable. PostgreSQL waits on its own terms.
    lock_wait: Annotated[float, Field(gt=0, le=86400)] = 30.0

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if url and not url.startswith((SQLITE_SCHEME, *POSTGRES_SCHEMES)):
            raise ValueError(
                "must be empty (the SQLite file in .newsletter/), sqlite:///FILE"
                " or postgresql://USER@HOST:PORT/DATABASE"
            )
        # An @ that libpq reads elsewhere than it looks would print part of the password.
        return check_unambiguous(url)


class WorkerSettings(SettingsTable):
    """`newsletter worker`: the long-running process that sends the site's mail."""

    poll: Annotated[float, Field(ge=0.05, le=60)] = 0.5  # seconds between looks for due mail
    # Seconds a worker's claim on a site mail lasts without renewal (renewed every third of
    # it); a dead worker's claimed mail goes back to the others after it.
    lease: Annotated[float, Field(ge=1, le=3600)] = 30.0
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 8  # then a deferred mail fails
    concurrency: Annotated[int, Field(ge=1, le=16)] = 2  # SMTP sessions for the site's mail


_QUIET = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def check_quiet_hours(value: str) -> str:
    """ "HH:MM-HH:MM" or ""."""
    if value and not _QUIET.match(value.strip()):
        raise ValueError(f'{value!r} is not hours such as 22:00-07:00 (or "" for none)')
    return value.strip()


def quiet_span(value: str) -> tuple[int, int] | None:
    """quiet_hours -> (start, end) in minutes of the day, or None for none."""
    match = _QUIET.match(value)
    if not value or match is None:
        return None
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    return h1 * 60 + m1, h2 * 60 + m2


class ScheduleSettings(SettingsTable):
    """Scheduled sends (`newsletter send --at`), started by `newsletter worker`."""

    # A send whose time passed while no worker ran starts when one comes back, unless it is
    # more than this late: then it is reported `missed`, not sent (news goes stale).
    grace: Duration = 6 * 3600.0
    # Welcome sequences' steps (sequences/) wait out these hours of [newsletter] timezone: no
    # step at 3 a.m. newsletter time. "HH:MM-HH:MM" (across midnight if the end comes first);
    # "" sends at any hour.
    quiet_hours: Annotated[str, AfterValidator(check_quiet_hours)] = "22:00-07:00"


class CheckSettings(SettingsTable):
    """`newsletter check --online`: the sender's DNS and every link of the issue."""

    online: bool = False  # every `check` (and send) runs the online checks, as --online
    # An image without alt text: a warning (pasted weeklies build), or an error for editors
    # who want every image described before a send.
    alt_text: Literal["warning", "error"] = "warning"
    # Hosts (and their subdomains) never fetched: sites that refuse robots.
    link_skip: list[str] = Field(default_factory=list)
    # "IP" or "IP:PORT" ("[IPv6]:PORT"); empty: the system's resolver (/etc/resolv.conf).
    nameservers: Nameservers = Field(default_factory=list)
    cache_ttl: Annotated[float, Field(ge=0)] = 3600.0  # seconds a link or DNS answer is reused
    # Seconds per DNS lookup, and per link request from connect to its last header line.
    timeout: Annotated[float, Field(gt=0)] = 5.0
    run_timeout: Annotated[float, Field(gt=0)] = 60.0  # seconds for a whole online run
    concurrency: Annotated[int, Field(ge=1, le=32)] = 4  # links fetched at once (1 per host)
    ca_file: Path | None = None  # a CA to trust besides the system's, for the link check
    # Links (and redirects) into loopback, private, link-local or reserved addresses: refused
    # (false), all allowed (true), or allowed in the listed networks only ("10.1.0.0/16").
    allow_private: bool | list[str] = False

    @field_validator("link_skip")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [host.strip().lower().rstrip(".") for host in value if host.strip()]

    @field_validator("allow_private")
    @classmethod
    def _networks(cls, value: bool | list[str]) -> bool | list[str]:
        return value if isinstance(value, bool) else ip_networks(value)


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


class Settings(SettingsTable):
    root: Path = Path()
    newsletter: NewsletterSettings = NewsletterSettings()
    render: RenderSettings = RenderSettings()
    paths: PathSettings = PathSettings()
    lists: dict[str, ListSettings] = Field(default_factory=dict)
    smtp: SmtpSettings = SmtpSettings()
    send: SendSettings = SendSettings()
    dkim: DkimSettings | None = None
    serve: ServeSettings = ServeSettings()
    webhooks: WebhooksSettings = WebhooksSettings()
    signup: SignupSettings = SignupSettings()
    bounces: BouncesSettings = BouncesSettings()
    outbox: OutboxSettings = OutboxSettings()
    check: CheckSettings = CheckSettings()
    worker: WorkerSettings = WorkerSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    tracking: TrackingSettings = TrackingSettings()
    privacy: PrivacySettings = PrivacySettings()
    # Signs unsubscribe and click links and return-path tags; unset, .newsletter/secret.
    secret: SecretStr | None = None
    # Earlier secrets, comma-separated, whose links and return-path tags still work.
    secret_previous: SecretStr | None = None
    smtp_password: SecretStr | None = None  # the password of [smtp] username
    bounces_password: SecretStr | None = None  # the password of the [bounces] imap mailbox
    # The providers' webhook keys (see [webhooks]): a provider without one answers 404.
    webhook_sendgrid_key: SecretStr | None = None  # SendGrid's signed-event verification key
    webhook_resend_secret: SecretStr | None = None  # Resend's signing secret (Svix)
    webhook_mailgun_key: SecretStr | None = None  # Mailgun's webhook signing key
    webhook_postmark_password: SecretStr | None = None  # the basic-auth password Postmark sends

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
    def database_target(self) -> Path | str:
        """Where the outbox is: the SQLite file, or the PostgreSQL URL (password included:
        never print it; Database.display, from dburl.redact_url, is the printable form)."""
        url = self.outbox.url
        return url if url.startswith(POSTGRES_SCHEMES) else self.database

    @property
    def signup_lists(self) -> list[str]:
        """The lists readers may sign up to on the site, in the config's order."""
        return [name for name, chosen in self.lists.items() if chosen.signup]

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
    raw = read_config(config, env, tables=Settings.model_fields.keys(), is_list=is_list_setting)
    _relay_passwords(raw.data, raw.path, raw.text, env)
    try:
        return Settings.model_validate(raw.data)
    except ValidationError as exc:
        raise raw.error(exc) from None


def is_list_setting(keys: tuple[str, ...]) -> bool:
    """Whether the setting at `keys` (["check", "nameservers"]; a table of tables such as
    [lists.NAME] takes its name as a key) is a list of values."""
    model: type[BaseModel] | None = Settings
    annotation: Any = None
    remaining = list(keys)
    while remaining:
        key = remaining.pop(0)
        if model is None:
            return False
        field = model.model_fields.get(key)
        if field is None:
            return False
        annotation = field.annotation
        if typing.get_origin(annotation) is dict and remaining:
            remaining.pop(0)  # the table's own name: [lists.main], [smtp.relays.backup]
            annotation = typing.get_args(annotation)[1]
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return typing.get_origin(annotation) is list


def _relay_passwords(data: dict[str, Any], path: Path, text: str, env: Mapping[str, str]) -> None:
    """Each [smtp.relays.NAME] password from the variable its `password_env` names; one written
    in the file is refused, as NEWSLETTER_SMTP_PASSWORD is."""
    smtp = data.get("smtp")
    relays = smtp.get("relays") if isinstance(smtp, dict) else None
    if not isinstance(relays, dict):
        return
    for name, relay in relays.items():
        if not isinstance(relay, dict):
            continue  # validation names it
        if "password" in relay:
            line = next(
                (
                    n
                    for n, raw in enumerate(text.splitlines(), 1)
                    if raw.strip() == f"[smtp.relays.{name}]"
                ),
                None,
            )
            raise ConfigError(
                f"{path}:{line or '?'}: smtp.relays.{name}.password must not be stored in the file",
                hint='Remove it, set password_env = "NEWSLETTER_SMTP_'
                f'{name.upper().replace("-", "_")}_PASSWORD" and export that variable.',
            )
        variable = relay.get("password_env")
        if isinstance(variable, str) and env.get(variable):
            relay["password"] = env[variable]
