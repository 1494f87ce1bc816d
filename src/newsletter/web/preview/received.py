"""A captured message's bytes in, what the preview's Mailbox shows of it out: its headers
decoded, its text and HTML parts, and a list of its other parts.

Anyone who can reach the capture server can put a message here, so every byte is hostile. The
page escapes what it shows (autoescape, and `visible` for controls and bidi overrides in a
header), the HTML part is served apart under a script-forbidding policy, and the work per
message is bounded before Python's email parser sees it:

- the caller reads at most READ_LIMIT bytes (the rest is named, not shown);
- `measure_structure` counts, in one pass of C-speed scans, what makes the parser slow: part
  delimiters (each part costs objects), containers (multipart and message parts, which nest) and
  lines (each line is checked against every open container's boundary). A message past a limit
  is shown as headers and raw text only;
- a Content-Type or Content-Disposition header with too many parameters is read as having none
  (the standard library's parameter parser is quadratic in semicolons);
- a header is cut before it is decoded, and only text encodings decode a part (punycode's
  decoder is quadratic).

What the frame shows loads nothing: the policy refuses remote resources, and `disarm_frames`
takes out what Chromium reaches for before it asks the policy.
"""

from __future__ import annotations

import codecs
import email.message
import email.parser
import email.policy
import logging
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from newsletter.send.mailbox import decode_header_text, raw_headers

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
READ_LIMIT = 2 * MIB  # bytes of a message read to show it
PART_LIMIT = 1000  # lines that open with "--": an upper bound on the parts
CONTAINER_LIMIT = 50  # Content-Type values naming multipart/* or message/*
HEADERS_READ = 256 * 1024  # bytes parsed for the headers of a message not taken apart
LINE_WORK_LIMIT = 4_000_000  # lines x nesting: the parser's boundary checks
PARAMETER_LIMIT = 64  # semicolons in a Content-Type or Content-Disposition value
PARAMETER_TEXT_LIMIT = 4096  # characters of such a value
HEADER_LIMIT = 200  # header rows shown
VALUE_LIMIT = 2000  # characters of a header value shown
LISTED_PARTS = 50  # other parts listed
SNIPPET_LIMIT = 140  # characters of an inbox line's preview text
_FED = 64 * 1024  # characters of an HTML part given to the preheader's parser at a time

# Anywhere, not only at a line's start: an upper bound, and a literal prefix the regex engine
# finds fast (matched against the lowered bytes).
_CONTAINER = re.compile(rb"content-type[ \t]*:\s*\"?\s*(?:multipart|message)")
# C0 and C1 controls but the tab, DEL, and the marks that reorder or hide text (bidi overrides
# and isolates, zero-width characters, line and paragraph separators, the BOM).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)
_FRAME_TAG = re.compile(r"<(/?)(i?frame|frameset)\b", re.IGNORECASE)
# Text encodings that are not charsets, punycode's decoder quadratic among them.
_NOT_CHARSETS = {"punycode", "idna"}


@dataclass(frozen=True)
class OtherPart:
    """A part that is neither the text nor the HTML shown: an attachment, a report, a message."""

    content_type: str
    filename: str
    size: int  # encoded, as on the wire


@dataclass(frozen=True)
class Structure:
    """What `measure_structure` counted in a message's bytes."""

    delimiters: int
    containers: int
    lines: int

    def too_complex(self) -> str | None:
        """Why Python's parser must not take this message apart, or None."""
        if self.containers > CONTAINER_LIMIT:
            return f"it declares more than {CONTAINER_LIMIT} multipart or message parts"
        if self.delimiters > PART_LIMIT:
            return f"it has more than {PART_LIMIT:,} part delimiters"
        # A multipart/digest's parts default to message/rfc822: two levels per container.
        if self.lines * (2 * self.containers + 1) > LINE_WORK_LIMIT:
            return f"its {self.lines:,} lines in {self.containers} nested parts are too many"
        return None


@dataclass(frozen=True)
class ReceivedMessage:
    """A captured message as its page shows it; every string still needs escaping."""

    size: int  # the whole file
    raw: str  # the bytes read, as text
    headers: list[tuple[str, str]]  # (name, decoded value), the first HEADER_LIMIT
    subject: str = ""
    sender: str = ""
    recipient: str = ""
    text: str | None = None
    html: str | None = None
    parts: list[OtherPart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is not shown, and why
    preheader: str = ""  # the HTML part's hidden preview text, if it opens with one

    @property
    def snippet(self) -> str:
        """What an inbox line shows after the subject: the preheader, else the text's opening."""
        return " ".join((self.preheader or self.text or "")[:1000].split())[:SNIPPET_LIMIT]


def open_received(data: bytes, size: int) -> ReceivedMessage:
    """The page's view of a message whose first bytes are `data` (of `size` in all)."""
    notes = []
    if size > len(data):
        notes.append(
            f"Only the first {len(data) / MIB:.0f} MiB of {size / MIB:.1f} MiB are shown; "
            "the .eml download has it all."
        )
    reason = measure_structure(data).too_complex()
    message, error = parse_bounded(data, whole=reason is None)
    if reason is not None:
        notes.append(
            f"Not taken apart into its parts: {reason}. Its headers and raw text are shown."
        )
    elif error is not None:
        notes.append(
            f"Not taken apart into its parts: {error}. Its headers and raw text are shown."
        )
    rows = raw_headers(message)
    if len(rows) > HEADER_LIMIT:
        notes.append(f"{len(rows) - HEADER_LIMIT:,} more headers are in the raw message.")
    headers = [(name, decode_header_text(value)) for name, value in rows[:HEADER_LIMIT]]
    first = {name.lower(): value for name, value in reversed(headers)}
    text = html = None
    parts: list[OtherPart] = []
    if reason is None and error is None:
        text, html, parts, more = pick_bodies(message)
        if more:
            notes.append(f"{more:,} more parts are in the raw message.")
    preheader = find_preheader(html) if html is not None else ""
    return ReceivedMessage(
        size=size,
        raw=data.decode("utf-8", "replace"),
        headers=headers,
        subject=first.get("subject", ""),
        sender=first.get("from", ""),
        recipient=first.get("to", "") or first.get("delivered-to", ""),
        text=text,
        html=html,
        parts=parts,
        notes=notes,
        preheader=preheader,
    )


def find_preheader(html: str) -> str:
    """The preheader of an HTML part: the text of a hidden element (`display:none`, or render's
    `nl-preheader` class) that comes before any visible text of the body, which is what an
    inbox shows after the subject; "" when the body opens with visible text. The parser stops
    as soon as it knows, so a long part costs no more than its opening."""
    finder = _PreheaderFinder()
    for start in range(0, len(html), _FED):
        finder.feed(html[start : start + _FED])
        if finder.done:
            break
    return " ".join(" ".join(finder.found).split())[: SNIPPET_LIMIT * 4]


class _PreheaderFinder(HTMLParser):
    """The first hidden element's text, if no visible text comes before it."""

    _UNSEEN = frozenset({"head", "title", "style", "script", "template"})
    _VOID = frozenset(
        {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.done = False
        self._unseen = 0  # depth inside head, style, script: text there is not shown
        self._hidden = 0  # depth inside the hidden element, once entered
        self._kept = 0  # characters of it kept

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done or tag in self._VOID:
            return
        if self._hidden:
            self._hidden += 1
        elif tag in self._UNSEEN:
            self._unseen += 1
        elif not self._unseen and _hides(dict(attrs)):
            self._hidden = 1

    def handle_endtag(self, tag: str) -> None:
        if self.done or tag in self._VOID:
            return
        if self._hidden:
            self._hidden -= 1
            # An empty hidden element (a spacer) is no preheader: look on.
            self.done = self._hidden == 0 and bool("".join(self.found).strip())
        elif tag in self._UNSEEN and self._unseen:
            self._unseen -= 1

    def handle_data(self, data: str) -> None:
        if self.done or self._unseen:
            return
        if self._hidden:
            self.found.append(data)
            self._kept += len(data)
            self.done = self._kept > SNIPPET_LIMIT * 4  # an element never closed: enough
        elif data.strip():
            self.done = True  # visible text first: the inbox shows that, not a preheader


def _hides(attrs: dict[str, str | None]) -> bool:
    classes = (attrs.get("class") or "").split()
    style = "".join((attrs.get("style") or "").lower().split())
    return "nl-preheader" in classes or "display:none" in style


def measure_structure(data: bytes) -> Structure:
    """Upper bounds, over-counted on purpose, on what makes parsing `data` slow. The parser
    splits lines at CR, LF or CRLF, so a bare CR starts a line here too."""
    return Structure(
        delimiters=data.count(b"\n--") + data.count(b"\r--") + data.startswith(b"--"),
        containers=sum(1 for _ in _CONTAINER.finditer(data.lower())),
        lines=data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") + 1,
    )


def parse_bounded(data: bytes, *, whole: bool) -> tuple[email.message.Message, str | None]:
    """The message parsed into its parts when `whole`, its headers alone otherwise (or when the
    parser fails on it: a hostile message may find a bug of the standard library's)."""
    parser = email.parser.BytesParser(_class=_BoundedMessage, policy=email.policy.compat32)
    if whole:
        try:
            return parser.parsebytes(data), None
        except RecursionError:
            error = "it nests too deeply"
        except Exception as exc:
            logger.exception("parsing a captured message failed")
            error = f"the parser failed ({type(exc).__name__})"
    else:
        error = None
    # The parser splits all it is given into lines, headers only or not: give it the head.
    return parser.parsebytes(data[:HEADERS_READ], headersonly=True), error


def pick_bodies(
    message: email.message.Message,
) -> tuple[str | None, str | None, list[OtherPart], int]:
    """The first text/plain and text/html that are not attachments (as a mail client shows
    them), the other leaf parts (the first LISTED_PARTS) and how many more there are. A
    message/* part is listed, not entered: a forwarded message's text is not this one's."""
    text = html = None
    parts: list[OtherPart] = []
    more = 0
    stack = [message]
    while stack:
        part = stack.pop()
        kind = part.get_content_type()
        if part.is_multipart() and not kind.startswith("message/"):
            stack.extend(reversed(_subparts(part)))
            continue
        attached = _disposition(part) == "attachment"
        if kind == "text/plain" and text is None and not attached:
            text = decode_body(part)
        elif kind == "text/html" and html is None and not attached:
            html = decode_body(part)
        elif len(parts) < LISTED_PARTS:
            parts.append(OtherPart(kind, _filename(part), _encoded_size(part)))
        else:
            more += 1
    return text, html, parts, more


def decode_body(part: email.message.Message) -> str:
    """A leaf part's payload, transfer encoding undone, as text in its declared charset."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    return payload.decode(text_charset(part.get_content_charset()), "replace")


def text_charset(name: str | None) -> str:
    """`name` if it is a text encoding Python knows (other than punycode and idna), else UTF-8."""
    try:
        codec = codecs.lookup(name or "utf-8")
        b"a".decode(codec.name, "replace")  # refuses what is not a text encoding (base64)
    except (LookupError, ValueError, TypeError):
        return "utf-8"
    return "utf-8" if codec.name in _NOT_CHARSETS else codec.name


def disarm_frames(html: str) -> str:
    """`html` with its frames (iframe, frame, frameset) renamed to an element that does nothing.

    Chromium opens a connection to a frame's URL before the policy refuses the load: no request
    goes out, but the sender's server sees when and from where the message was read. Mail
    clients drop frames anyway. A tag name cannot be spelled otherwise (entities make text, not
    tags), and a srcdoc attribute needs a frame to live in."""
    return _FRAME_TAG.sub(r"<\1x-\2", html)


def visible(text: str, limit: int = VALUE_LIMIT) -> str:
    """`text` cut to `limit` characters, its controls shown as symbols (a line feed as ␊) and its
    invisible or reordering marks as their code points: a header cannot pass for two, or hide."""
    shown = _INVISIBLE.sub(_symbol, text[:limit])
    if len(text) > limit:
        shown += f"… ({len(text) - limit:,} more characters)"
    return shown


def _symbol(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def _disposition(part: email.message.Message) -> str:
    return str(part.get("Content-Disposition", "")).split(";", 1)[0].strip().lower()


def _filename(part: email.message.Message) -> str:
    name = part.get_filename()
    return decode_header_text(name) if isinstance(name, str) else ""


def _encoded_size(part: email.message.Message) -> int:
    payload = part.get_payload()
    if isinstance(payload, str):
        return len(payload)
    return sum(_encoded_size(p) for p in _subparts(part))


def _subparts(part: email.message.Message) -> list[email.message.Message]:
    payload = part.get_payload()
    if not isinstance(payload, list):
        return []
    return [p for p in payload if isinstance(p, email.message.Message)]


class _BoundedMessage(email.message.Message):
    """A Message whose parameter lookups give up on a value with too many parameters: the
    parser asks for each multipart's boundary, and the standard parser is quadratic there."""

    def get_param(
        self, param: str, failobj: Any = None, header: str = "content-type", unquote: bool = True
    ) -> Any:
        if _too_many_parameters(self.get(header)):
            return failobj
        return super().get_param(param, failobj, header, unquote)

    def get_params(
        self, failobj: Any = None, header: str = "content-type", unquote: bool = True
    ) -> Any:
        if _too_many_parameters(self.get(header)):
            return failobj
        return super().get_params(failobj, header, unquote)


def _too_many_parameters(value: object) -> bool:
    if value is None:
        return False
    text = str(value)
    return len(text) > PARAMETER_TEXT_LIMIT or text.count(";") > PARAMETER_LIMIT
