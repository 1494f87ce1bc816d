"""The check before a send: a command's context, an issue number and a list in; a SendVerdict out.

`newsletter check` prints this value, and a send takes it before anything goes out: the
checks (draft.review's findings on the sample message of that list, SpamAssassin's score of it,
and the online checks when asked or when `[check] online` is on) as one value: whether the send
may go, the errors that refuse it, and what its confirmation shows (the subject, the encoded
HTML size against Gmail's clip, the spam score's line, the warnings), and the draft it checked,
which is what the send then sends. Nothing here prints,
asks or exits: `send` calls it before anything is planned (a scheduled send too, in its own
process: the worker does not check first).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from newsletter.checks.lint import Finding
from newsletter.checks.publicurl import base_url_findings
from newsletter.checks.spamscore import Scoring, SpamResult, spam_findings
from newsletter.context import CommandContext
from newsletter.draft import Draft, review
from newsletter.errors import SubscriberListError, display_path
from newsletter.importers.subscribers import check_list
from newsletter.issues import issue_path
from newsletter.rendering.clip import GMAIL_CLIP, KB

if TYPE_CHECKING:
    from newsletter.config.settings import Settings
    from newsletter.preflight.run import OnlineReport


__all__ = [
    "SendVerdict",
    "fingerprint",
    "inspect_send",
]


@dataclass(frozen=True)
class SendVerdict:
    """What the checks said about sending `number` to `list_name` now."""

    number: int
    list_name: str
    subject: str
    html_size: int  # the sample's HTML part on the wire, after its transfer encoding
    html_encoding: str
    spam: SpamResult
    findings: tuple[Finding, ...]  # errors first; the warnings the issue silences are not here
    silenced: int  # warnings the issue file's `silence:` held back
    silences: tuple[str, ...]  # what held them back, one per `silence:` entry that did
    online: OnlineReport | None  # None: the online checks were not asked for
    ephemeral_key: bool  # NEWSLETTER_SECRET unset: the sample was signed with a throwaway key
    fingerprint: str  # the rendered message's (see `fingerprint`): a test repeats when it changes
    # What was checked: the send builds every message from this render, never from the file
    # again (an edit saved after the checks ran waits for the next send).
    draft: Draft = field(compare=False, repr=False)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "error")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level != "error")

    @property
    def passed(self) -> bool:
        """No error: the send may go without --force."""
        return not self.errors

    def size_line(self) -> str:
        """The HTML part against the clip, as the confirmation shows it."""
        return (
            f"{self.html_size / KB:.1f} KB encoded ({self.html_encoding}), "
            f"{self.html_size / GMAIL_CLIP:.0%} of Gmail's ~102 KB clip"
        )

    def spam_line(self) -> str:
        """The score in a line; without SpamAssassin, that it was not measured (never an error)."""
        return self.spam.summary()

    def tally(self) -> str:
        """`2 error(s), 1 warning(s), 1 silenced`, as `check` ends."""
        silenced = f", {self.silenced} silenced" if self.silenced else ""
        return f"{len(self.errors)} error(s), {len(self.warnings)} warning(s){silenced}"


def inspect_send(
    context: CommandContext,
    number: int,
    list_name: str,
    *,
    online: bool | None = None,
    sending: bool = False,
) -> SendVerdict:
    """Run `check`'s checks on the message `list_name` would get. `online`: True or False
    forces the online checks on or off; None takes `[check] online`. `sending`: for a send
    (now or booked), where a base_url readers cannot reach is an error for a real list;
    `check` warns of it (checks/publicurl.py). Raises what loading the
    issue raises (a bad file is a NewsletterError naming its lines). The database is read
    through `context` (the draft's date, the list's size), never created."""
    settings = context.settings
    # SpamAssassin's cold start (~1 s, kept scores aside) would come after everything else;
    # started first, it loads while the issue renders and scores while the other checks (and
    # the online ones) run. Its score is in the verdict, so an error still refuses the send
    # before anything is planned.
    path = issue_path(settings.issues_dir, number)
    with Scoring(hint=_scoring_hint(settings, path, list_name)) as scoring:
        draft = review(
            settings,
            path,
            list_name,
            built=lambda message: scoring.feed(message, fingerprint(message)),
            dates=context.first_sent(),
        )
        report = None
        if settings.check.online if online is None else online:
            from newsletter.preflight.run import check_online  # the network stack: when asked

            database = context.existing_database()
            report = check_online(settings, draft.issue, draft.message, list_name, database)
        spam = scoring.result()
    findings = [
        *draft.findings,
        *spam_findings(spam),
        *(report.findings if report else []),
        *list_findings(settings, list_name),
        *base_url_findings(
            settings.newsletter.base_url,
            list_name,
            staging=settings.mailing_list(list_name).staging,
            sending=sending,
        ),
        *sent_findings(context, number, list_name, draft),
    ]
    findings.sort(key=lambda f: f.level != "error")
    return SendVerdict(
        number=number,
        list_name=list_name,
        subject=draft.subject,
        html_size=draft.html_size,
        html_encoding=draft.html_encoding,
        spam=spam,
        findings=tuple(findings),
        silenced=sum(len(s.findings) for s in draft.silenced),
        silences=tuple(str(s) for s in draft.silenced),
        online=report,
        ephemeral_key=draft.ephemeral_key,
        fingerprint=fingerprint(draft.message),
        draft=draft,
    )


_ROWS_NAMED = 5


def sent_findings(
    context: CommandContext, number: int, list_name: str, draft: Draft
) -> list[Finding]:
    """An issue that went to this real list and has changed since: readers have the text the
    send recorded, and the archive will show the file's. A warning, never an error: fixing a
    typo for the archive is the editor's right; a sample signed with a throwaway key differs
    every time, so it is not compared."""
    database = context.existing_database()
    if database is None or draft.ephemeral_key:
        return []
    print_ = fingerprint(draft.message)
    day = context.first_sent().get(number)  # the newsletter's own day, as the email shows it
    return [
        Finding(
            "warning",
            "sent",
            f"issue {number} went to {sent.list_name} on {day or sent.sent_at.date()};"
            " readers have that text; the archive will show this one"
            f" (`newsletter diff --issue {number}` shows what changed)",
        )
        for sent in database.sent_issues.of(number)
        if sent.list_name == list_name and sent.fingerprint != print_
    ]


def list_findings(settings: Settings, list_name: str) -> list[Finding]:
    """The list's CSV as a send would read it: a file it cannot read is an error (the send
    would stop); rows it would skip (invalid, duplicated) are a warning with the counts and the
    rows named, so a list that mostly fails is seen before the send, not in its log."""
    chosen = settings.mailing_list(list_name)
    if chosen.path is None:
        return []
    path = Path(display_path(settings.resolve(chosen.path)))
    if not path.exists():
        # A checkout without the list (CI: the lists are kept out of git) checks the issue;
        # the send itself refuses a list file that is not there.
        return []
    try:
        counted = check_list(path)
    except SubscriberListError as exc:
        return [Finding("error", "list", f"{exc.message} ({exc.hint})")]
    if not counted.rejected_count:
        return []
    named = [f"{p.path}:{p.line}" for p in counted.rejected[:_ROWS_NAMED]]
    more = counted.rejected_count - len(named)
    rows = ", ".join(named) + (f" and {more} more" if more > 0 else "")
    kinds = [f"{counted.invalid} invalid"] if counted.invalid else []
    kinds += [f"{counted.duplicate} duplicate"] if counted.duplicate else []
    return [
        Finding(
            "warning",
            "list",
            f"{path}: {counted.rejected_count} of {counted.rows} row(s) get nothing "
            f"({', '.join(kinds)}): {rows}; `newsletter subscribers` names each row's fault",
        )
    ]


# Header fields of the sample message that differ each time it is built, the same email or not.
_EVERY_TIME = (b"date:", b"message-id:", b"dkim-signature:")


def _scoring_hint(settings: Settings, path: Path, list_name: str) -> str:
    """What the sample message is mostly made from, known before it is built: the issue file's
    text, the list, and the settings that shape a message (not the relay, the database or the
    project's folder: the same issue sent through another port is the same message). A hint
    only: the templates, the date or another setting may still make another message, and then
    SpamAssassin starts when fed (spamscore.Scoring)."""
    try:
        text = path.read_bytes()
    except OSError:
        return ""
    shaping = settings.model_dump_json(include=_SHAPING)
    return f"{hashlib.sha256(text).hexdigest()}\0{list_name}\0{shaping}"


_SHAPING = {"newsletter", "render", "serve", "tracking", "dkim"}


def fingerprint(message: bytes) -> str:
    """The sample message as the list gets it (its subject with a test marker, its headers
    from the config, its HTML and text, the date it shows) less the fields that differ on every
    build (Date, Message-ID, DKIM-Signature). Equal fingerprints, the same email."""
    head, _, body = message.partition(b"\r\n\r\n")
    kept: list[bytes] = []
    skipping = False
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t"):  # a folded field's next line
            if not skipping:
                kept.append(line)
            continue
        skipping = line.lower().startswith(_EVERY_TIME)
        if not skipping:
            kept.append(line)
    return hashlib.sha256(b"\r\n".join(kept) + b"\r\n\r\n" + body).hexdigest()
