"""The doctor's checks of this machine's side of the project: the secret, the outbox (reachable,
migrated, private), the worker's heartbeat in it, and the state folder's free space. Settings in,
Diagnoses out; nothing is changed (the outbox is opened without migrating it)."""

from __future__ import annotations

import shutil
import stat
import time
from pathlib import Path

from newsletter.config.configfile import MIN_SECRET_LENGTH, SECRET_ENV, SECRET_FILE
from newsletter.config.settings import Settings
from newsletter.database import LATEST, Database, database_exists, open_project_database
from newsletter.database.heartbeats import ALIVE_WITHIN
from newsletter.doctor.diagnosis import Diagnosis, failed, passed
from newsletter.errors import NewsletterError, display_path

_LOST = (
    "back it up apart from this machine (a password manager): if it is lost, every unsubscribe,"
    " preference and click link already sent stops working"
)
_START_WORKER = (
    "Start it: `systemctl enable --now newsletter-worker` with the units of `newsletter deploy"
    " systemd`, or run `newsletter worker` under your process supervisor."
)


def check_secret(settings: Settings) -> Diagnosis:
    var = SECRET_ENV["secret"]
    file = settings.root / SECRET_FILE
    if settings.secret is None:
        return failed(
            "secret",
            f"not set: neither {var} nor {display_path(file)}",
            "Run `newsletter init` in a new project, or write one: python3 -c 'import secrets;"
            f" print(secrets.token_urlsafe(32))' > {SECRET_FILE}; chmod 600 {SECRET_FILE}",
        )
    value = settings.secret.get_secret_value()
    if len(value) < MIN_SECRET_LENGTH:
        return failed(
            "secret",
            f"{var} is too short ({len(value)} characters; at least {MIN_SECRET_LENGTH})",
            f"Set {var} to a long random value, e.g. python3 -c 'import secrets;"
            " print(secrets.token_urlsafe(32))' (a changed secret: keep the old one in"
            " NEWSLETTER_SECRET_PREVIOUS so the links already sent keep working)",
        )
    if _file_secret(file) != value:
        return passed("secret", f"set ({len(value)} characters) from {var}; {_LOST}")
    mode = stat.S_IMODE(file.stat().st_mode)
    if mode & 0o077:
        return failed(
            "secret",
            f"{display_path(file)} is readable by other users (mode {mode:04o})",
            f"chmod 600 {display_path(file)}",
        )
    where = f"{display_path(file)} (mode {mode:04o})"
    return passed("secret", f"set ({len(value)} characters) from {where}; {_LOST}")


def _file_secret(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def check_database(settings: Settings) -> list[Diagnosis]:
    """The database, then the worker's heartbeat in it (which needs a database to be read)."""
    target = settings.database_target
    if not database_exists(target):
        missing = f"no outbox at {display_path(target)} yet"
        return [
            failed("database", missing, "Run `newsletter outbox migrate` (as the service user)."),
            failed("worker", f"{missing}: no worker has run", _START_WORKER),
        ]
    mode = stat.S_IMODE(target.stat().st_mode) if isinstance(target, Path) else 0
    try:
        with open_project_database(settings, migrate=False) as database:
            return _database(database, mode)
    except NewsletterError as exc:
        fix = exc.hint or "Check [outbox] url and that the database server runs and lets us in."
        return [
            failed("database", exc.message, fix),
            failed("worker", "the outbox cannot be read: no heartbeat to look at", fix),
        ]


def _database(database: Database, mode: int) -> list[Diagnosis]:
    version = database.backend.version()
    where = f"{database.backend.name}: {database.display}"
    if version < LATEST:
        behind = f"{where}: schema version {version}, {LATEST - version} migration(s) behind"
        return [
            failed("database", behind, "Run `newsletter outbox migrate`."),
            failed("worker", f"{where} is not migrated: no heartbeat to look at", _START_WORKER),
        ]
    if version > LATEST:
        ahead = f"{where}: schema version {version}, newer than this newsletter's {LATEST}"
        fix = "Upgrade newsletter on this machine to the version the others run."
        return [failed("database", ahead, fix), failed("worker", ahead, fix)]
    if mode & 0o077:
        verdict = failed(
            "database",
            f"{where} is readable by other users (mode {mode:04o}): it holds every reader's"
            " address",
            f"chmod 600 {database.display}",
        )
    else:
        private = f", mode {mode:04o}" if mode else ""
        verdict = passed("database", f"{where}: schema version {version} (current{private})")
    return [verdict, _worker(database)]


def _worker(database: Database) -> Diagnosis:
    beat = database.heartbeats.latest()
    if beat is None:
        return failed("worker", "no worker has beaten in the last day", _START_WORKER)
    age = max(time.time() - beat.at, 0.0)
    seen = f"last beat {age:.0f} s ago from {beat.host} (pid {beat.pid})"
    if age > ALIVE_WITHIN:
        return failed(
            "worker",
            f"{seen}: older than {ALIVE_WITHIN:.0f} s, so it is stopped, hung or cut off from the"
            " outbox",
            "Look at its log (journalctl -u newsletter-worker) and restart it.",
        )
    return passed("worker", f"alive: {seen}")


def check_disk(settings: Settings, min_free: int) -> Diagnosis:
    """Free space where the state folder is (or would be): the outbox and its WAL grow there."""
    folder = settings.state_dir
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    free = f"{usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.1f} GiB"
    where = f"{free} under {display_path(folder)}"
    if usage.free < min_free:
        return failed(
            "disk",
            f"{where}: less than {min_free / 2**30:.1f} GiB",
            "Free space on that file system, or move [paths] state to a larger one.",
        )
    return passed("disk", where)


# What makes a provider's route answer: its key in the environment (SES: its SNS topics).
_KEYS = {
    "sendgrid": ("webhook_sendgrid_key", SECRET_ENV["webhook_sendgrid_key"]),
    "resend": ("webhook_resend_secret", SECRET_ENV["webhook_resend_secret"]),
    "mailgun": ("webhook_mailgun_key", SECRET_ENV["webhook_mailgun_key"]),
    "postmark": ("webhook_postmark_password", SECRET_ENV["webhook_postmark_password"]),
}


def webhook_keyed(settings: Settings) -> list[str]:
    """The providers whose webhook route answers: a key set for it (SES: [webhooks] ses_topics)."""
    keyed = [name for name, (field, _) in _KEYS.items() if getattr(settings, field) is not None]
    return keyed + (["ses"] if settings.webhooks.ses_topics else [])


def _key_of(provider: str) -> str:
    return _KEYS[provider][1] if provider in _KEYS else "[webhooks] ses_topics"


def check_webhook(settings: Settings) -> list[Diagnosis]:
    """With [webhooks] relay set, the return path is the provider's: its bounces and complaints
    reach us only by its signed webhook. Has one ever reached us? And a provider's key set
    while [webhooks] relay names another (or none): its events come, but the messages carry no
    tag it echoes, so none is tied to a reader. (Nothing to check with neither.)"""
    provider = settings.webhooks.relay
    keyed = webhook_keyed(settings)
    stray = [name for name in keyed if name != provider]
    found = []
    if stray:
        named = f'"{provider}"' if provider else "not set"
        keys = ", ".join(_key_of(name) for name in stray)
        found.append(
            failed(
                "webhook.relay",
                f"{keys} set, but [webhooks] relay is {named}: the messages carry no tag"
                f" {' or '.join(stray)} echoes, so its bounces and complaints are tied to no"
                " reader",
                f'Set [webhooks] relay = "{stray[0]}" when the mail goes out through it'
                " (docs/guide/relays.md), or unset the key of a provider you do not use.",
            )
        )
    if not provider:
        return found
    return [*found, _webhook_seen(settings, provider, provider in keyed)]


def _webhook_seen(settings: Settings, provider: str, keyed: bool) -> Diagnosis:
    url = f"{settings.newsletter.base_url.rstrip('/')}/webhooks/{provider}"
    fix = (
        f"Point {provider}'s event webhook (bounces and complaints) at {url}, set its key in"
        " the environment (docs/guide/relays.md), and send a test event from its dashboard."
    )
    if not keyed:
        return failed(
            "webhook",
            f'[webhooks] relay is "{provider}" but {_key_of(provider)} is not set: {url}'
            " answers 404, so no bounce or complaint of it reaches us",
            fix,
        )
    if not database_exists(settings.database_target):
        return failed("webhook", f"no outbox yet: no signed {provider} event received", fix)
    try:
        with open_project_database(settings, migrate=False) as database:
            seen = database.webhook_events.last_seen(provider)
    except NewsletterError as exc:
        return failed("webhook", exc.message, exc.hint or fix)
    if seen is None:
        return failed("webhook", f"no signed {provider} event received yet at {url}", fix)
    # The event's id is claimed when its signature verifies: that it came, not that it was
    # applied to a reader (an event for no row, or held for review, is claimed too).
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seen))
    return passed("webhook", f"{provider}: the last signed event was received at {when}")


def check_signup(settings: Settings) -> Diagnosis:
    """Which lists readers may sign up to on serve's /signup. None is a choice (readers come by
    import), so this line passes either way; it says what /signup will answer."""
    page = f"{settings.newsletter.base_url.rstrip('/')}/signup"
    lists = [name for name, chosen in settings.lists.items() if chosen.signup]
    if lists:
        return passed("signup", f"{page}: readers may sign up to {', '.join(lists)}")
    return passed(
        "signup",
        f"off: no list has signup = true, so {page} answers 404 (Page not found); set"
        " signup = true in a [lists.NAME] table for the signup page",
    )
