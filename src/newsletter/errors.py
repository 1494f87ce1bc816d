"""Every error the tool raises on purpose, each saying what went wrong and how to fix it.

The tree (the CLI maps the whole of it to exit code 1, with no traceback; a DatabaseError under
`send`'s run to 4, a stopped run)::

    NewsletterError                 message + hint
    ├── ConfigError                 newsletter.toml or NEWSLETTER_* is wrong
    │   └── SecretError             NEWSLETTER_SECRET missing or too short (how to make one)
    ├── ProjectExistsError          `init` was asked to write a project over one (nothing written)
    ├── IssueError                  an issue file cannot be used (one Problem per fault)
    │   └── IssueNotFoundError      no issues/N.yaml or N.md (lists the ones there are)
    ├── TemplateError               a Jinja or MJML template fails to render
    ├── SubscriberListError         a whole list is unusable (missing file, no header row)
    │   └── ExportFileError         another tool's export cannot be imported as a whole
    ├── UnsafeHeaderError           a header value could inject a header (CR, LF, NUL, =?..?=)
    ├── TokenError                  an unsubscribe token is forged, altered or malformed
    │   └── LinkExpiredError        a genuine confirmation link past its expiry
    ├── DeliveryError               sending cannot start (another send running, the log unusable)
    │   ├── CheckFailedError        the checks before a send found errors (nothing planned)
    │   └── TransportError          SMTP connect, TLS or AUTH failed for the whole run
    ├── DatabaseError               the project's database failed once open: disk full, locked,
    │                               damaged, its connection lost (whatever the command was doing)
    ├── ScheduleError               a scheduled send cannot be booked as given
    └── InboxError                  the bounce mailbox (IMAP or Maildir) cannot be read

Bad subscriber *rows* are not errors: they are reported and skipped (see subscribers.py). A run
that stops midway (circuit breaker, quota, a signal) is not an error either: send.engine.RunReport
says why, and `send` exits 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CheckFailedError",
    "ConfigError",
    "DatabaseError",
    "DeliveryError",
    "ExportFileError",
    "InboxError",
    "IssueError",
    "IssueNotFoundError",
    "LinkExpiredError",
    "NewsletterError",
    "Problem",
    "ProjectExistsError",
    "ScheduleError",
    "SecretError",
    "SubscriberListError",
    "TemplateError",
    "TokenError",
    "TransportError",
    "UnsafeHeaderError",
    "display_path",
]


def display_path(path: Path | str) -> str:
    """`path` relative to the working directory when it is below it: what the editor typed."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class NewsletterError(Exception):
    """Base of the tree: `message` says what is wrong, `hint` how to fix it."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(NewsletterError):
    hint = "Fix newsletter.toml (or the NEWSLETTER_* variable named above)."


# The shell line that makes a secret and sets it (the hint below, the manual, `make demo`'s end).
KEY_EXPORT_LINE = (
    "export NEWSLETTER_SECRET=\"$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')\""
)


class SecretError(ConfigError):
    """NEWSLETTER_SECRET is missing or too short. The hint is the command to type: a new
    editor's first real send stops here, and "set it to a long random value" left them guessing
    how (issue 29)."""

    hint = (
        f"Make one and export it in the shell you send from:\n  {KEY_EXPORT_LINE}\n"
        "Keep that value (a password manager, your shell profile, the service's environment) and"
        " use the same one for every send and for `newsletter serve`: the links already sent are"
        " signed with it (at least 16 characters). Or keep it in the project's"
        " .newsletter/secret (0600, out of git), where `newsletter init` puts one."
    )


class ProjectExistsError(NewsletterError):
    hint = "Run `newsletter init` with a new folder's name."


@dataclass(frozen=True)
class Problem:
    """One fault in a file: where (path:line), which field, and what is wrong."""

    path: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class IssueError(NewsletterError):
    hint = "Fix the lines named above and run `newsletter check` again."

    def __init__(self, problems: list[Problem], *, hint: str | None = None) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems), hint=hint)


class IssueNotFoundError(IssueError):
    pass


class TemplateError(NewsletterError):
    hint = "Fix the template named above; `newsletter preview` shows the result as you save."


class SubscriberListError(NewsletterError):
    hint = (
        "Check the list's `path` in newsletter.toml and that the CSV has a header row with `email`."
    )


class ExportFileError(SubscriberListError):
    hint = (
        "Import the file as the other tool exported it (its CSV, or the ZIP it came in); "
        "--format names the tool when the header does not."
    )


class UnsafeHeaderError(NewsletterError):
    hint = "Remove line breaks, control characters and `=?...?=` sequences from the value."


class TokenError(NewsletterError):
    hint = "Use the unsubscribe link exactly as it came in the email."


class LinkExpiredError(TokenError):
    """A genuine confirmation link past its expiry ([signup] confirm_expiry)."""

    hint = "Sign up again: a new confirmation mail comes with a new link."


class DeliveryError(NewsletterError):
    pass


class CheckFailedError(DeliveryError):
    """The checks before a send found errors: nothing was planned or sent."""

    hint = "Fix the issue and run `newsletter check` again; --force sends it as it is."


class TransportError(DeliveryError):
    hint = "Check [smtp] in newsletter.toml and NEWSLETTER_SMTP_PASSWORD, then re-run."


class DatabaseError(NewsletterError):
    """The project's database (the delivery log, subscribers and consent, clicks, schedules,
    bounce reports) failed under a command that had it open: a database fault, whatever the
    command was doing. Each backend maps its driver's errors to one (outbox/sqlite.py,
    outbox/postgres.py), naming the cause; a send that meets one stops, and the re-run recovers
    as it does after a kill."""

    hint = "Fix the cause named above, then re-run the same command to resume."


class ScheduleError(NewsletterError):
    """A scheduled send that cannot be booked as given: its time, its zone, its issue."""


class InboxError(NewsletterError):
    hint = "Check [bounces] imap in newsletter.toml and NEWSLETTER_BOUNCES_PASSWORD, then re-run."
