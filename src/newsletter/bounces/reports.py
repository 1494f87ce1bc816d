"""One returned mail (bytes) in, one classified Report out: who failed, how, and which send.

In order of trust:

1. RFC 3464 delivery status notifications (``multipart/report; report-type=delivery-status``):
   one finding per recipient block, from its Action, Status and Diagnostic-Code.
2. RFC 5965 ARF complaint reports (``report-type=feedback-report``): a Feedback-Type that is a
   complaint (kinds.is_complaint: abuse, fraud, virus, other or none; never not-spam or
   auth-failure) is one about Original-Rcpt-To (often redacted: then the tag decides).
3. Auto-replies (RFC 3834 Auto-Submitted, X-Autoreply, Precedence: auto_reply, vacation and
   out-of-office subjects) are recognised and never count, unless they come from a mail delivery
   system (Exim marks its plain-text bounces Auto-Submitted too).
4. Anything else goes through Mailman's detectors (flufl.bounce): qmail, old Exchange, Yahoo...

What ties a report to the message it is about is collected, not trusted: VERP tags (the report's
own To/Delivered-To, quoted return paths, the quoted X-Newsletter-Tag header) and the quoted
Message-IDs. policy.py verifies them against the outbox.

Anyone can mail the bounce address, so a mail that cannot be parsed at all (nested a few
thousand multiparts deep, or anything else that trips the parser) is a Report that was not
understood, with the reason in `problem`: never an exception that would stop the run.
"""

from __future__ import annotations

import email
import email.errors
import email.header
import email.parser
import email.utils
import hashlib
import logging
import re
from dataclasses import dataclass
from email.message import Message

from newsletter.bounces.kinds import Kind, find_status, is_complaint, kind_of, status_of, worst
from newsletter.bounces.verp import find_tags

# flufl.bounce logs a detector's crash with its traceback; here a crash means "not understood".
logging.getLogger("flufl.bounce").setLevel(logging.CRITICAL)

_DSN_TYPES = ("message/delivery-status", "message/global-delivery-status")
_ORIGINAL_TYPES = ("message/rfc822", "text/rfc822-headers", "message/global-headers")
_AUTO_SUBJECT = re.compile(
    r"^\s*(?:auto(?:matic)?[ _-]?(?:reply|response|antwort|answer)|autoreply|out of (?:the )?office"
    r"|ooo\b|on vacation|vacation|abwesenheit|absence|r[ée]ponse automatique|自动回复|自動回覆"
    r"|自動回复|自動応答|不在)",
    re.IGNORECASE,
)
DAEMON_NAMES = ("mailer-daemon", "mailer_daemon", "postmaster", "mail-daemon", "mdaemon")
_DAEMON_LABELS = re.compile(r"mail delivery|mailer.daemon|postmaster|delivery status", re.I)
_QUOTED_ID = re.compile(
    r"^[ \t>]*(?:X-Original-)?Message-ID:[ \t]*(<[^<>\s]+>)", re.IGNORECASE | re.MULTILINE
)
_REFERENCE = re.compile(r"<[^<>\s]+>")
# Where a plain-text bounce starts quoting the original (qmail, Exim, Yahoo, Exchange ...).
_COPY_MARKER = re.compile(
    r"^\s*-{2,}.*(?:copy of|original message|returned message|message follows)", re.I | re.M
)
_ADDRESS = re.compile(r"<?([^\s<>;@]+@[^\s<>;@]+)>?")


@dataclass(frozen=True)
class Diagnosis:
    """What a report says about one recipient. `address` is "" when the reporter redacted it."""

    address: str
    kind: Kind
    status: str = ""
    diagnostic: str = ""


@dataclass(frozen=True)
class Report:
    """One returned mail, classified. `key` identifies the mail itself (its Message-ID, else a
    digest of its bytes), so reading it twice is recognised."""

    key: str
    kind: Kind
    source: str  # dsn | arf | flufl.bounce | auto-reply | "" (not understood)
    findings: tuple[Diagnosis, ...]
    tags: tuple[str, ...]
    message_ids: tuple[str, ...]
    subject: str
    sender: str
    problem: str = ""  # why the mail could not be parsed at all, if it could not
    # The findings' addresses are the envelope recipients the relay was handed (a provider's
    # event), never a forward's: one that is not the row's recipient is about another row.
    envelope: bool = False

    @property
    def understood(self) -> bool:
        return self.kind is not Kind.UNKNOWN


def read_report(raw: bytes) -> Report:
    """Classify one mail exactly as it came from the mailbox; never raises."""
    try:
        return _classify(raw)
    except RecursionError:
        problem = "cannot be parsed: its parts are nested too deep"
    except Exception as exc:  # the parser or a detector tripping over hostile input
        problem = f"cannot be parsed: {type(exc).__name__}"
    subject, sender = _named(raw)
    return Report(
        key="sha256:" + hashlib.sha256(raw).hexdigest(),
        kind=Kind.UNKNOWN,
        source="",
        findings=(),
        tags=(),
        message_ids=(),
        subject=subject,
        sender=sender,
        problem=problem,
    )


def _named(raw: bytes) -> tuple[str, str]:
    """Subject and From of a mail whose parts could not be parsed: the header block alone
    parses without descending into any part."""
    try:
        head = email.parser.BytesHeaderParser().parsebytes(raw)
        return _decoded(_field(head, "Subject")), _decoded(_field(head, "From"))
    except Exception:  # as hostile as the rest: then it stays nameless
        return "", ""


def _classify(raw: bytes) -> Report:
    msg = email.message_from_bytes(raw)
    findings, source = _findings(msg)
    kinds = [f.kind for f in findings]
    if source == "auto-reply":
        kinds = [Kind.AUTO_REPLY]
    originals = _originals(msg)
    texts = [raw.decode("latin-1"), *_texts(msg)]
    return Report(
        key=_key(msg, raw),
        kind=worst(kinds),
        source=source if kinds else "",
        findings=tuple(findings),
        tags=tuple(dict.fromkeys(t for text in texts for t in find_tags(text))),
        message_ids=_message_ids(msg, originals, [*texts[1:], _body_of(raw)]),
        subject=_decoded(_field(msg, "Subject")),
        sender=_decoded(_field(msg, "From")),
    )


def _findings(msg: Message) -> tuple[list[Diagnosis], str]:
    if msg.get_content_type() == "multipart/report":
        param = msg.get_param("report-type") or ""
        report_type = email.utils.collapse_rfc2231_value(param).lower()
        if report_type == "feedback-report":
            return _complaints(msg), "arf"
        found = _dsn(msg)
        if report_type == "delivery-status" or found:
            return found, "dsn"
    from_daemon = _from_delivery_system(msg)
    if _is_auto_reply(msg) and not from_daemon:
        return [], "auto-reply"
    found = _detected(msg)
    if found:
        return found, "flufl.bounce"
    if _is_auto_reply(msg):
        return [], "auto-reply"
    return [], ""


def _dsn(msg: Message) -> list[Diagnosis]:
    found = []
    for part in msg.walk():
        if part.get_content_type() not in _DSN_TYPES:
            continue
        for block in _blocks(part):
            named = _field(block, "Original-Recipient") or _field(block, "Final-Recipient")
            address = _address(named)
            if not address and not _field(block, "Action"):
                continue  # the per-message block (Reporting-MTA, Arrival-Date ...)
            diagnostic = _unfold(_field(block, "Diagnostic-Code"))
            diagnostic = re.sub(r"^\s*[a-z-]+\s*;\s*", "", diagnostic, flags=re.IGNORECASE)
            status = status_of(_field(block, "Status"), diagnostic)
            kind = kind_of(status, _field(block, "Action") or "failed")
            if kind is not None:
                found.append(Diagnosis(address, kind, status, diagnostic))
    return found


def _blocks(part: Message) -> list[Message]:
    payload = part.get_payload()
    if isinstance(payload, list):
        return [p for p in payload if isinstance(p, Message)]
    text = payload if isinstance(payload, str) else ""
    parser = email.parser.HeaderParser()
    return [parser.parsestr(chunk) for chunk in re.split(r"\r?\n[ \t]*\r?\n", text) if chunk]


def _complaints(msg: Message) -> list[Diagnosis]:
    found = []
    for part in msg.walk():
        if part.get_content_type() != "message/feedback-report":
            continue
        for fields in _blocks(part)[:1]:
            feedback = _unfold(_field(fields, "Feedback-Type")).lower()
            if not is_complaint(feedback):
                continue
            given = fields.get_all("Original-Rcpt-To") or []
            addresses = [_address(str(a)) for a in given] or [""]
            found += [
                Diagnosis(a, Kind.COMPLAINT, "", f"feedback-type {feedback}") for a in addresses
            ]
    return found


def _detected(msg: Message) -> list[Diagnosis]:
    from flufl.bounce import all_failures  # its detectors load slowly; only for odd mail

    try:
        temporary, permanent = all_failures(msg)
    except Exception:  # a heuristic detector tripping over odd input: not a bounce we know
        return []
    # Only the bounce's own words: the quoted original below the marker may hold anything.
    status = find_status("\n".join(_COPY_MARKER.split(t, 1)[0] for t in _texts(msg)))
    found = []
    for raw in sorted(permanent):
        # A code in the text ("#5.2.2") refines the detector's verdict; its class must agree.
        kind = kind_of(status) if status.startswith("5") else None
        found.append(Diagnosis(_address(raw.decode("latin-1")), kind or Kind.HARD, status))
    for raw in sorted(temporary - permanent):
        found.append(Diagnosis(_address(raw.decode("latin-1")), Kind.DELAYED, status))
    return found


def _is_auto_reply(msg: Message) -> bool:
    auto = _field(msg, "Auto-Submitted").split(";")[0].strip().lower()
    if auto and auto != "no":
        return True
    if any(msg.get(h) for h in ("X-Autoreply", "X-Autorespond", "X-Autoresponder")):
        return True
    if _field(msg, "Precedence").strip().lower() == "auto_reply":
        return True
    return bool(_AUTO_SUBJECT.match(_decoded(_field(msg, "Subject"))))


def _from_delivery_system(msg: Message) -> bool:
    sender = _decoded(_field(msg, "From"))
    address = _address(sender)
    return address.partition("@")[0] in DAEMON_NAMES or bool(_DAEMON_LABELS.search(sender))


def _originals(msg: Message) -> list[Message]:
    found: list[Message] = []
    for part in msg.walk():
        kind = part.get_content_type()
        if kind not in _ORIGINAL_TYPES:
            continue
        payload = part.get_payload()
        if isinstance(payload, list):
            found += [p for p in payload[:1] if isinstance(p, Message)]
        else:
            text = part.get_payload(decode=True)
            text = text if isinstance(text, bytes) else b""
            found.append(email.parser.BytesHeaderParser().parsebytes(text))
    return found


def _texts(msg: Message) -> list[str]:
    """Every text part, decoded: bounces in base64 or quoted-printable hide quoted headers."""
    texts = []
    for part in msg.walk():
        if part.get_content_maintype() != "text":
            continue
        data = part.get_payload(decode=True)
        if isinstance(data, bytes):
            texts.append(data.decode(part.get_content_charset() or "utf-8", "replace"))
    return texts


def _message_ids(msg: Message, originals: list[Message], texts: list[str]) -> tuple[str, ...]:
    """The original's Message-ID as quoted, then as replied to (In-Reply-To, References: an
    auto-reply names the message it answers only there)."""
    ids = [_field(m, "Message-ID").strip() for m in originals]
    ids += [match for text in texts for match in _QUOTED_ID.findall(text)]
    for field in ("In-Reply-To", "References"):
        ids += _REFERENCE.findall(_field(msg, field))
    return tuple(dict.fromkeys(i for i in ids if i.startswith("<") and i.endswith(">")))


def _body_of(raw: bytes) -> str:
    head_end = re.search(rb"\r?\n\r?\n", raw)
    return raw[head_end.end() :].decode("latin-1") if head_end else ""


def _key(msg: Message, raw: bytes) -> str:
    message_id = _field(msg, "Message-ID").strip()
    if message_id:
        return "mid:" + message_id[:500]
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _field(msg: Message, name: str) -> str:
    """A header as text; compat32 hands out Header objects for raw 8-bit values."""
    value = msg.get(name)
    try:
        return "" if value is None else str(value)
    except (UnicodeError, LookupError):
        return ""


def _address(value: str | None) -> str:
    if not value:
        return ""
    text = value.split(";", 1)[1] if ";" in value else value
    match = _ADDRESS.search(text.strip())
    return match.group(1).strip().lower() if match else ""


def _unfold(value: str) -> str:
    return " ".join(str(value).split())


def _decoded(value: str) -> str:
    try:
        return _unfold(str(email.header.make_header(email.header.decode_header(str(value)))))
    except (ValueError, LookupError, UnicodeError, email.errors.MessageError):
        return _unfold(str(value))
