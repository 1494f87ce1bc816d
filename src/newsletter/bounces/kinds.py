"""An RFC 3463 status (and DSN action) in, what it means for the address out: the one place.

DSNs, non-standard bounces and SMTP replies at send time are all judged by this table, so a
`550 5.1.1` means the same whether the relay said it during RCPT or a DSN said it a day later.

    2.x.x, or Action delivered/relayed/expanded   not a failure
    Action delayed                                DELAYED (a warning: still being retried)
    4.x.x                                         SOFT    (try again; suppressed after N in a row)
    5.x.x                                         HARD    (the address is dead: suppressed at once)
    5.2.2 mailbox full, 5.2.3 message too long,   SOFT    (permanent for this message, not for
    5.3.4 message too big, 5.6.x content,                  the address: the reader may be fine)
    5.7.x refused by policy (spam, DMARC, ...)

5.3.x (mail system) and 5.5.x (protocol) stay HARD in a report: Outlook.com's DSN for a dead
mailbox says `550 5.5.0 Requested action not taken: mailbox unavailable`.

A provider's webhook event is judged by the same table: its code (given, or found in the server's
text, as a DSN's is) decides when there is one, and the provider's own permanent/temporary label
only when there is none (`failure_kind`); a failure the provider still retries is a delay. A
feedback report (ARF, or SES's complaintFeedbackType) is a complaint by its type (`is_complaint`).

`blames_message` draws the line a send acts on (send/replies.py): a refusal that says nothing
about the address (content, protocol, the relay's own system, the message's length, or a bare
code with no RFC 3463 status at all) fails that message and suppresses no one.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Kind(StrEnum):
    """What a report says about one recipient (or, for a whole report, the worst of them)."""

    COMPLAINT = "complaint"
    HARD = "hard"
    SOFT = "soft"
    DELAYED = "delayed"
    AUTO_REPLY = "auto-reply"
    UNKNOWN = "unknown"

    @property
    def counts(self) -> bool:
        """Whether this kind feeds the policy (delays and auto-replies never do)."""
        return self in (Kind.COMPLAINT, Kind.HARD, Kind.SOFT)


# Worst first: a report's verdict is the first of these any of its recipients has.
SEVERITY = (Kind.COMPLAINT, Kind.HARD, Kind.SOFT, Kind.DELAYED, Kind.AUTO_REPLY, Kind.UNKNOWN)

# 5.x.x codes about this message or the sender, not about the address (subject.detail).
_NOT_THE_ADDRESS = ("2.2", "2.3", "3.4")
# Policy (spam, DMARC) and content: never about the address, the reader may be fine.
_NOT_ABOUT_THE_ADDRESS = ("6", "7")
# The subjects of a refusal that would refuse this message to anyone: mail system (5.3.x),
# protocol (5.5.x), content (5.6.x). 5.7.x stays apart: a policy refusal may be the
# recipient's own (a blocklist at one provider), and many in a row are not the message's.
_THE_MESSAGE = ("3", "5", "6")

# RFC 5965 Feedback-Types that are a reader's complaint. `not-spam` says the reader marked the
# message as NOT spam, `auth-failure` (RFC 6591) reports the message's authentication: neither
# is the reader asking to stop.
COMPLAINT_TYPES = frozenset({"abuse", "fraud", "virus", "other"})

STATUS = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_BASIC = re.compile(r"^\s*([245])\d\d\b")


def find_status(text: str) -> str:
    """The first RFC 3463 code in a diagnostic or reply text ("5.1.1"); else the class of a
    leading basic SMTP code ("550 ..." -> "5.0.0"); else ""."""
    match = STATUS.search(text)
    if match:
        return ".".join(match.groups())
    basic = _BASIC.match(text)
    return f"{basic.group(1)}.0.0" if basic else ""


def status_of(field: str, diagnostic: str) -> str:
    """The RFC 3463 status of one recipient from a report's status field and the server's text:
    the field's, unless it says only the class ("5.0.0") and the text has the detail the
    remote server gave ("550 5.1.1"); the text's when the field has none."""
    match = STATUS.search(field)
    status = ".".join(match.groups()) if match else ""
    detailed = find_status(diagnostic)
    if detailed and (not status or (status.endswith(".0.0") and detailed[0] == status[0])):
        return detailed
    return status


def kind_of(status: str, action: str = "failed") -> Kind | None:
    """The Kind of one recipient's outcome, or None when it is not a failure at all."""
    action = action.strip().lower()
    if action in ("delivered", "relayed", "expanded"):
        return None
    if action == "delayed":
        return Kind.DELAYED
    match = STATUS.fullmatch(status.strip())
    if not match:
        # A failure without a usable status: RFC 3464 makes `failed` final, so it is permanent.
        return Kind.HARD if action == "failed" else None
    klass, subject, detail = match.groups()
    if klass == "2":
        return None
    if klass == "4":
        return Kind.SOFT
    if f"{subject}.{detail}" in _NOT_THE_ADDRESS or subject in _NOT_ABOUT_THE_ADDRESS:
        return Kind.SOFT
    return Kind.HARD


def failure_kind(status: str, label: Kind) -> Kind:
    """A provider's failed delivery: by its status (`status_of`) as `kind_of` judges a DSN's when
    it has an RFC 3463 code, by the provider's own `label` (HARD for permanent, SOFT for
    temporary) only when it has none. So Mailgun's "permanent" 5.7.1 (a blocklist refusing the
    sender) is soft, as a mailed DSN's 5.7.1 is."""
    found = kind_of(status) if STATUS.fullmatch(status.strip()) else None
    return found or label  # no code, or a 2.x.x one in a failure: the label says more


def is_complaint(feedback_type: str) -> bool:
    """Whether a feedback report of this Feedback-Type (ARF's field, SES's complaintFeedbackType)
    is a complaint: one of COMPLAINT_TYPES, or none given (a mailbox provider's loop that names no
    type still reports a reader marking the message as spam)."""
    kind = feedback_type.strip().lower()
    return not kind or kind in COMPLAINT_TYPES


def blames_message(text: str) -> bool:
    """Whether a permanent refusal's text says the message failed rather than the address: no
    RFC 3463 status in it at all (a bare `554 Transaction failed`, a bare `500`), or one about
    the content, the protocol, the relay's system or the message's length."""
    match = STATUS.search(text)
    if not match:
        return True
    _klass, subject, detail = match.groups()
    return subject in _THE_MESSAGE or f"{subject}.{detail}" == "2.3"


def unsure_of_the_address(text: str) -> bool:
    """Whether a refusal may be the relay's trouble as much as the address's: no RFC 3463
    status (a bare `550`), or a mail system (5.3.x) or protocol (5.5.x) one. To RCPT, which
    names the address, such a refusal is the recipient's, but soft: one is not proof enough
    to lose the reader for good (Outlook.com's dead mailbox is `550 5.5.0`)."""
    match = STATUS.search(text)
    return match is None or match.group(2) in ("3", "5")


def worst(kinds: list[Kind]) -> Kind:
    """The verdict of a report from its recipients' kinds."""
    return min(kinds, key=SEVERITY.index) if kinds else Kind.UNKNOWN
