"""A real IMAP server for tests: Dovecot in the foreground on 127.0.0.1, a free port, TLS only.

`run_dovecot()` writes a throwaway configuration into a fresh folder (a passwd-file with one user,
Maildir storage, a certificate from a throwaway trustme CA), starts `dovecot -F -c FILE`, waits
for the port and yields a `Dovecot` with the CA to trust. Everything goes when the block ends.
Mail is put in with IMAP APPEND, as any client would. Dovecot is Debian's `dovecot-imapd`.
"""

from __future__ import annotations

import contextlib
import imaplib
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
USER = "bounces@news.example.org"
PASSWORD = "imap-test-password-42"

CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
auth_mechanisms = plain login
first_valid_uid = {uid}
mail_uid = {uid}
mail_gid = {gid}
mail_location = maildir:{root}/mail/%n
namespace inbox {{
  inbox = yes
  separator = /
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/passwd
}}
service imap-login {{
  inet_listener imap {{
    port = 0
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


@dataclass(frozen=True)
class Dovecot:
    host: str
    port: int
    user: str
    password: str
    ca_file: Path
    root: Path

    @property
    def url(self) -> str:
        user = self.user.replace("@", "%40")
        return f"imaps://{user}@{self.host}:{self.port}/INBOX"

    @contextlib.contextmanager
    def client(self) -> Iterator[imaplib.IMAP4_SSL]:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        imap = imaplib.IMAP4_SSL(self.host, self.port, ssl_context=ctx, timeout=10)
        try:
            imap.login(self.user, self.password)
            yield imap
        finally:
            imap.logout()

    def append(self, raw: bytes, folder: str = "INBOX") -> None:
        """Deliver one mail into `folder`, as a client would (APPEND)."""
        crlf = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        with self.client() as imap:
            imap.create(folder)  # "already exists" is fine
            typ, data = imap.append(folder, "", None, crlf)
            assert typ == "OK", data

    def count(self, folder: str = "INBOX") -> int:
        """How many mails `folder` holds (0 when it does not exist)."""
        with self.client() as imap:
            typ, data = imap.select(f'"{folder}"', readonly=True)
            return int(data[0] or 0) if typ == "OK" else 0


def available() -> str | None:
    """Why Dovecot cannot run here, or None."""
    if not os.path.exists(DOVECOT):
        return "dovecot is not installed (Debian package dovecot-imapd; .ci/run installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def run_dovecot() -> Iterator[Dovecot]:
    # Not pytest's tmp_path: its parents are 0700, and Dovecot's unprivileged login processes
    # must reach the sockets in base_dir.
    root = Path(tempfile.mkdtemp(prefix="newsletter-dovecot-"))
    root.chmod(0o755)
    try:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_pem.write_to_path(root / "key.pem")
        cert.cert_chain_pems[0].write_to_path(root / "cert.pem")
        ca.cert_pem.write_to_path(root / "ca.pem")
        uid, gid = (65534, 65534) if os.geteuid() == 0 else (os.getuid(), os.getgid())
        (root / "mail").mkdir()
        os.chown(root / "mail", uid, gid)
        (root / "passwd").write_text(
            f"{USER}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{root}/mail::\n", encoding="utf-8"
        )
        port = _free_port()
        config = root / "dovecot.conf"
        config.write_text(CONFIG.format(root=root, port=port, uid=uid, gid=gid), encoding="utf-8")
        process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait(port, process, root)
            yield Dovecot("127.0.0.1", port, USER, PASSWORD, root / "ca.pem", root)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _wait(port: int, process: subprocess.Popen[bytes], root: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read().decode(errors="replace") if process.stdout else ""
            log_file = root / "dovecot.log"
            log = log_file.read_text(errors="replace") if log_file.exists() else ""
            raise RuntimeError(f"dovecot exited with {process.returncode}: {out}\n{log}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("dovecot did not open its port within 20 s")


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    """One Dovecot per test session (it takes about half a second to start); a conftest imports
    this fixture. On CI a missing Dovecot fails the test instead of skipping it."""
    reason = available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with run_dovecot() as server:
        yield server
