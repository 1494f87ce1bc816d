"""Reading the bounce mailbox: a real Dovecot over TLS on loopback, and a Maildir folder."""

from __future__ import annotations

import mailbox
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme

from newsletter.bounces.inbox import KEYWORD, MaildirInbox, open_inbox
from newsletter.config.settings import Settings, load_settings
from newsletter.errors import InboxError
from support import POLL
from support.dovecot import Dovecot

CORPUS = Path(__file__).resolve().parents[1] / "data" / "bounces"
SAMPLE = ["postfix-user-unknown.eml", "human-reply.eml", "arf-rfc5965.eml"]


def imap_settings(project: Path, server: Dovecot, **extra: str) -> Settings:
    environ = {
        "NEWSLETTER_BOUNCES__IMAP": server.url,
        "NEWSLETTER_BOUNCES__CA_FILE": str(server.ca_file),
        "NEWSLETTER_BOUNCES_PASSWORD": server.password,
        **extra,
    }
    return load_settings(project / "newsletter.toml", environ=environ)


def test_imap_reads_everything_and_moves_only_what_it_files(
    project: Path, dovecot: Dovecot
) -> None:
    folder = "Test-Move"
    for name in SAMPLE:
        dovecot.append((CORPUS / name).read_bytes(), "INBOX")
    settings = imap_settings(project, dovecot, NEWSLETTER_BOUNCES__PROCESSED=folder)
    inbox = open_inbox(settings)
    try:
        mails = list(inbox.mails())
        assert [m.raw.count(b"Subject:") > 0 for m in mails] == [True] * len(SAMPLE)
        assert b"human" not in mails[0].raw
        assert b"Recipient address rejected" in mails[0].raw
        inbox.file(mails[0])
        inbox.file(mails[2])
    finally:
        inbox.close()
    assert dovecot.count(folder) == 2
    assert dovecot.count("INBOX") == len(SAMPLE) - 2
    with dovecot.client() as imap:
        imap.select("INBOX")
        typ, data = imap.uid("SEARCH", "UNSEEN")
        # The mail left behind was read with BODY.PEEK: still unseen, as it was.
        assert typ == "OK"
        assert len(data[0].split()) == 1
        imap.uid("STORE", data[0].split()[0], "+FLAGS", "(\\Deleted)")
        imap.expunge()


def test_imap_flags_instead_of_moving(project: Path, dovecot: Dovecot) -> None:
    dovecot.append((CORPUS / "qmail-no-mailbox.eml").read_bytes(), "Flagged")
    url = dovecot.url.replace("/INBOX", "/Flagged")
    settings = imap_settings(
        project, dovecot, NEWSLETTER_BOUNCES__IMAP=url, NEWSLETTER_BOUNCES__PROCESSED=""
    )
    inbox = open_inbox(settings)
    try:
        (mail,) = list(inbox.mails())
        inbox.file(mail)
        assert list(inbox.mails()) == []  # flagged mails are not read again
    finally:
        inbox.close()
    with dovecot.client() as imap:
        imap.select("Flagged")
        _typ, data = imap.uid("FETCH", mail.ref, "(FLAGS)")
        assert KEYWORD.encode() in data[0]
        assert b"\\Seen" in data[0]


def test_imap_refuses_a_certificate_it_cannot_verify(project: Path, dovecot: Dovecot) -> None:
    settings = imap_settings(project, dovecot, NEWSLETTER_BOUNCES__CA_FILE="")
    settings = settings.model_copy(
        update={"bounces": settings.bounces.model_copy(update={"ca_file": None})}
    )
    with pytest.raises(InboxError, match="certificate does not verify"):
        open_inbox(settings)


@pytest.mark.slow
def test_imap_wrong_password_is_a_clear_error(project: Path, dovecot: Dovecot) -> None:
    settings = imap_settings(project, dovecot, NEWSLETTER_BOUNCES_PASSWORD="wrong-password-123")
    with pytest.raises(InboxError) as info:
        open_inbox(settings)
    assert "wrong-password" not in str(info.value)
    assert "AUTHENTICATIONFAILED" in str(info.value) or "failed" in str(info.value).lower()


def test_imap_needs_the_password_and_tls(project: Path, dovecot: Dovecot) -> None:
    settings = imap_settings(project, dovecot, NEWSLETTER_BOUNCES_PASSWORD="")
    with pytest.raises(InboxError, match="NEWSLETTER_BOUNCES_PASSWORD is not set"):
        open_inbox(settings)
    plain = imap_settings(
        project, dovecot, NEWSLETTER_BOUNCES__IMAP=dovecot.url.replace("imaps:", "imap:")
    )
    with pytest.raises(InboxError, match="expected imaps://"):
        open_inbox(plain)
    inline = imap_settings(
        project,
        dovecot,
        NEWSLETTER_BOUNCES__IMAP=dovecot.url.replace("@127", ":hunter2-secret@127"),
    )
    with pytest.raises(InboxError, match="must not hold the password") as info:
        open_inbox(inline)
    assert "hunter2" not in str(info.value)


def test_maildir_reads_and_moves_into_a_folder(tmp_path: Path) -> None:
    box = mailbox.Maildir(tmp_path / "box", create=True)
    for name in SAMPLE:
        box.add((CORPUS / name).read_bytes())
    inbox = MaildirInbox(tmp_path / "box", "Newsletter-Processed")
    mails = list(inbox.mails())
    assert len(mails) == len(SAMPLE)
    inbox.file(mails[0])
    inbox.close()
    assert len(mailbox.Maildir(tmp_path / "box")) == len(SAMPLE) - 1
    # The file's own bytes: Message.as_bytes() re-serialises, and changes some of the corpus
    # (which mail comes first depends on the Maildir's file names, random per run).
    moved = list((tmp_path / "box" / ".Newsletter-Processed").glob("*/*"))
    assert [path.read_bytes() for path in moved] == [mails[0].raw]


def test_maildir_flag_mode_leaves_mail_in_place(tmp_path: Path) -> None:
    box = mailbox.Maildir(tmp_path / "box", create=True)
    key = box.add((CORPUS / "qmail-no-mailbox.eml").read_bytes())
    inbox = MaildirInbox(tmp_path / "box", "")
    (mail,) = list(inbox.mails())
    inbox.file(mail)
    assert "S" in mailbox.Maildir(tmp_path / "box").get_message(key).get_flags()


def test_not_a_maildir(tmp_path: Path) -> None:
    with pytest.raises(InboxError, match="not a Maildir"):
        MaildirInbox(tmp_path, "x")


def test_no_mailbox_configured(settings: Settings) -> None:
    with pytest.raises(InboxError, match="no bounce mailbox"):
        open_inbox(settings)


@contextmanager
def hostile_imap(tmp_path: Path, refusal: bytes) -> Iterator[tuple[str, Path]]:
    """An IMAP server over TLS on loopback that logs anyone in, then refuses SELECT with
    `refusal`; its imaps:// URL and the CA that signed its certificate."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"* OK [CAPABILITY IMAP4rev1] hostile\r\n")
            for line in self.rfile:
                tag, _, rest = line.partition(b" ")
                command = rest.split(b" ", 1)[0].strip().upper()
                if command == b"SELECT":
                    self.wfile.write(tag + b" NO " + refusal + b"\r\n")
                elif command == b"LOGOUT":
                    self.wfile.write(b"* BYE\r\n" + tag + b" OK bye\r\n")
                    return
                else:
                    self.wfile.write(tag + b" OK done\r\n")

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True

        def get_request(self) -> tuple[socket.socket, Any]:
            sock, address = super().get_request()
            return ctx.wrap_socket(sock, server_side=True), address

    with Server(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
        thread.start()
        try:
            yield f"imaps://editor@127.0.0.1:{server.server_address[1]}/INBOX", tmp_path / "ca.pem"
        finally:
            server.shutdown()


def test_a_servers_refusal_is_shown_as_every_reply_is(project: Path, tmp_path: Path) -> None:
    """The server's words in an InboxError go through the one cleaner (safetext.printable):
    its terminal sequences and bidirectional overrides show as `?`, as in every command."""
    refusal = "\x1b]0;owned\x07 folder \u202egone".encode()
    with hostile_imap(tmp_path, refusal) as (url, ca):
        environ = {
            "NEWSLETTER_BOUNCES__IMAP": url,
            "NEWSLETTER_BOUNCES__CA_FILE": str(ca),
            "NEWSLETTER_BOUNCES_PASSWORD": "pw",
        }
        with pytest.raises(InboxError) as info:
            open_inbox(load_settings(project / "newsletter.toml", environ=environ))
    assert info.value.message.endswith("select INBOX failed: ?]0;owned? folder ?gone")
