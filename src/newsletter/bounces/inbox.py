"""The bounce mailbox: [bounces] imap (IMAP over verified TLS) or a Maildir folder in, raw mails
out; `file(mail)` then moves (or flags) one mail that was understood. Nothing else is touched.

Both kinds give the same three calls, `mails()`, `file(mail)` and `close()`. Understood mails
go to the `processed` folder (created when missing), or with `processed = ""` are marked seen and
(on IMAP) given the keyword NewsletterProcessed, which later runs skip. A mail that was not
understood stays exactly where and as it was: the reading uses BODY.PEEK, so not even its
Seen flag changes.

Anyone can mail the bounce address, so only the first MAX_MAIL_BYTES of each mail are read
(IMAP fetches that partial body, a Maildir file is read that far): the report parts and the
quoted original's headers come first, and a 60 MB mail costs no more than its first megabyte.
Filing moves the whole mail as it is (IMAP MOVE, or renaming the Maildir file), never re-read.
"""

from __future__ import annotations

import imaplib
import mailbox
import os
import re
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol
from urllib.parse import unquote, urlsplit

from newsletter.config.configfile import SECRET_ENV
from newsletter.config.settings import BouncesSettings, Settings
from newsletter.errors import InboxError
from newsletter.formats.safetext import printable

KEYWORD = "NewsletterProcessed"
MAX_MAIL_BYTES = 1 << 20
_PASSWORD_ENV = SECRET_ENV["bounces_password"]
_UIDS = re.compile(rb"\d+")


@dataclass(frozen=True)
class Mail:
    """One mail as the mailbox holds it, its first MAX_MAIL_BYTES; `ref` is its IMAP UID or
    its Maildir file (`new/NAME` or `cur/NAME:2,FLAGS`)."""

    ref: str
    raw: bytes


class Inbox(Protocol):
    where: str

    def mails(self) -> Iterator[Mail]: ...

    def file(self, mail: Mail) -> None: ...

    def close(self) -> None: ...


def open_inbox(settings: Settings, maildir: Path | None = None) -> Inbox:
    """The Maildir at `maildir` when given, else the IMAP mailbox of [bounces] imap."""
    if maildir is not None:
        return MaildirInbox(maildir, settings.bounces.processed)
    if not settings.bounces.imap:
        raise InboxError(
            "no bounce mailbox: [bounces] imap is not set and no --maildir was given",
            hint='Set [bounces] imap = "imaps://user@host/INBOX" or pass --maildir DIR.',
        )
    password = settings.bounces_password
    if password is None:
        raise InboxError(
            f"{_PASSWORD_ENV} is not set: cannot log in to {_redacted(settings.bounces.imap)}",
            hint=f"Set {_PASSWORD_ENV} in the environment to the mailbox's password.",
        )
    return ImapInbox(settings.bounces, password.get_secret_value(), settings.root)


class MaildirInbox:
    """A Maildir folder (what `newsletter mailbox` writes, or a mail server's). Its files are
    read and renamed directly: the mailbox module would parse a whole mail to move it."""

    def __init__(self, path: Path, processed: str) -> None:
        if not (path / "cur").is_dir() or not (path / "new").is_dir():
            raise InboxError(
                f"{path}: not a Maildir (it needs cur/ and new/ folders)",
                hint="Pass the Maildir folder itself, e.g. --maildir .newsletter/mailbox.",
            )
        self.where = str(path)
        self._path = path
        self._processed = processed
        self._folder_made = False

    def mails(self) -> Iterator[Mail]:
        found = [
            f"{sub}/{entry.name}"
            for sub in ("new", "cur")
            for entry in os.scandir(self._path / sub)
            if not entry.name.startswith(".") and entry.is_file()
        ]
        for ref in sorted(found, key=lambda r: r[4:].split(":")[0]):
            try:
                with open(self._path / ref, "rb") as handle:
                    raw = handle.read(MAX_MAIL_BYTES)
            except FileNotFoundError:
                continue  # taken by another reader meanwhile
            yield Mail(ref, raw)

    def file(self, mail: Mail) -> None:
        sub, _, name = mail.ref.partition("/")
        if not self._processed:
            unique, _, info = name.partition(":2,")
            flags = "".join(sorted(set(info) | {"S"}))
            self._move(mail.ref, self._path / "cur" / f"{unique}:2,{flags}")
            return
        # A Maildir++ folder (.Name), which Dovecot and other IMAP servers show as a folder;
        # one rename moves the mail whole, flags and all.
        folder = self._path / f".{self._processed}"
        if not self._folder_made:
            mailbox.Maildir(self._path, factory=None, create=False).add_folder(self._processed)
            self._folder_made = True
        self._move(mail.ref, folder / sub / name)

    def _move(self, ref: str, target: Path) -> None:
        try:
            os.rename(self._path / ref, target)
        except FileNotFoundError:
            pass  # filed by another reader meanwhile
        except OSError as exc:
            raise InboxError(f"{self.where}: cannot move {ref}: {exc.strerror}") from None

    def close(self) -> None:
        pass


class ImapInbox:
    """One folder of an IMAP mailbox over TLS (imaps://, port 993 unless given)."""

    def __init__(self, config: BouncesSettings, password: str, root: Path) -> None:
        url = urlsplit(config.imap)
        self.where = _redacted(config.imap)
        if url.scheme != "imaps" or not url.hostname or not url.username:
            raise InboxError(
                f"[bounces] imap = {self.where!r}: expected imaps://user@host[:port]/FOLDER",
                hint="Only IMAP over TLS (imaps://) is supported; put the user before the @ "
                "(an @ in it written as %40).",
            )
        if url.password is not None:
            raise InboxError(
                "[bounces] imap must not hold the password",
                hint=f"Remove it from the URL and set {_PASSWORD_ENV} in the environment.",
            )
        self._folder = unquote(url.path.lstrip("/")) or "INBOX"
        self._processed = config.processed
        ca = config.ca_file
        if ca is not None and not ca.is_absolute():
            ca = root / ca
        try:
            ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
            self._imap = imaplib.IMAP4_SSL(
                url.hostname, url.port or 993, ssl_context=ctx, timeout=config.timeout
            )
        except ssl.SSLCertVerificationError as exc:
            raise InboxError(
                f"{self.where}: the server's certificate does not verify: {exc.verify_message}",
                hint="Fix the server's certificate, or trust its CA with [bounces] ca_file.",
            ) from None
        except (OSError, ssl.SSLError, imaplib.IMAP4.error) as exc:
            raise InboxError(f"{self.where}: cannot connect: {exc}") from None
        try:
            self._imap.login(unquote(url.username), password)
            self._command(self._imap.select(_quoted(self._folder)), f"select {self._folder}")
        except imaplib.IMAP4.error as exc:
            self._imap.shutdown()
            raise InboxError(f"{self.where}: {printable(str(exc))}") from None

    def mails(self) -> Iterator[Mail]:
        criteria = "ALL" if self._processed else f"UNKEYWORD {KEYWORD}"
        with self._guard("search"):
            found = self._command(self._imap.uid("SEARCH", criteria), "search")
        for uid in _UIDS.findall(b" ".join(d for d in found if isinstance(d, bytes))):
            with self._guard("fetch"):
                part = f"(BODY.PEEK[]<0.{MAX_MAIL_BYTES}>)"
                data = self._command(self._imap.uid("FETCH", uid, part), "fetch")
            raw = next((d[1] for d in data if isinstance(d, tuple)), None)
            if isinstance(raw, bytes):
                yield Mail(uid.decode(), raw)

    def file(self, mail: Mail) -> None:
        with self._guard("moving a processed mail"):
            self._file(mail)

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        # A dropped connection or a timeout mid-run: what was filed so far stays filed (and
        # recorded), the rest is read again next time.
        try:
            yield
        except (OSError, imaplib.IMAP4.error) as exc:
            raise InboxError(f"{self.where}: {what}: {printable(str(exc))}") from None

    def _file(self, mail: Mail) -> None:
        if not self._processed:
            flags = f"(\\Seen {KEYWORD})"
            self._command(self._imap.uid("STORE", mail.ref, "+FLAGS", flags), "store")
            return
        target = _quoted(self._processed)
        self._imap.create(target)  # "already exists" is fine
        if b"MOVE" in b" ".join(self._capabilities()):
            self._command(self._imap.uid("MOVE", mail.ref, target), "move")
            return
        self._command(self._imap.uid("COPY", mail.ref, target), "copy")
        self._command(self._imap.uid("STORE", mail.ref, "+FLAGS", "(\\Deleted)"), "store")
        self._command(self._imap.expunge(), "expunge")

    def close(self) -> None:
        try:
            self._imap.logout()
        except (OSError, imaplib.IMAP4.error):
            self._imap.shutdown()

    def __enter__(self) -> ImapInbox:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _capabilities(self) -> list[bytes]:
        typ, data = self._imap.capability()
        return [d for d in data if isinstance(d, bytes)] if typ == "OK" else []

    def _command(self, answer: tuple[str, Sequence[object]], what: str) -> Sequence[object]:
        typ, data = answer
        if typ != "OK":
            detail = b" ".join(d for d in data if isinstance(d, bytes)).decode(errors="replace")
            raise InboxError(f"{self.where}: {what} failed: {printable(detail)}")
        return data


def _quoted(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _redacted(url: str) -> str:
    """The URL without any password someone put in it."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()
