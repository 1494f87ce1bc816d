"""A project with every production piece in place passes every check of `newsletter doctor`
and exits 0: serve behind a TLS proxy at an https base_url, SMTP with STARTTLS and AUTH, the
sender's DNS, a migrated outbox with a worker that beat, and the bounce mailbox. Each piece is a
real server on loopback; the doctor runs as a process and its lines are read."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dkimkeys import dkim_value
from support.dnszone import dns_server
from support.doctoring import doctor_env
from support.dovecot import Dovecot
from support.onlineproject import configure
from support.sendcli import newsletter, spawn
from support.smtp import Authenticator, FaultyHandler, start

SENDER = "news.good.example"


@contextlib.asynccontextmanager
async def tls_proxy(context: ssl.SSLContext, port: int) -> AsyncIterator[int]:
    """TLS on a free port of 127.0.0.1, each connection piped to 127.0.0.1:`port` (Caddy's part)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


@pytest.mark.slow
async def test_a_project_ready_for_production_passes_every_check(
    project: Path, dovecot: Dovecot, tmp_path: Path
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    zone = {
        (SENDER, "TXT"): ["v=spf1 ip4:192.0.2.0/24 -all"],
        (SENDER, "MX"): ["10 mx.good.example"],
        (f"nl._domainkey.{SENDER}", "TXT"): [dkim_value(key)],
        ("_dmarc.good.example", "TXT"): ["v=DMARC1; p=none; rua=mailto:d@good.example"],
    }
    handler = FaultyHandler()
    with dns_server(zone) as (dns_port, _):
        configure(
            project,
            nameserver=f"127.0.0.1:{dns_port}",
            base_url="https://unused.example",
            ca_file=ca_file,
            dkim_key=key,
        )
        async with start(
            handler, starttls=server_tls, auth=Authenticator("news", "s3cret")
        ) as smtp:
            env = doctor_env(
                smtp.port,
                NEWSLETTER_SMTP__SECURITY="starttls",
                NEWSLETTER_SMTP__USERNAME="news",
                NEWSLETTER_SMTP__CA_FILE=str(ca_file),
                NEWSLETTER_SMTP_PASSWORD="s3cret",
                NEWSLETTER_BOUNCES__IMAP=dovecot.url,
                NEWSLETTER_BOUNCES__CA_FILE=str(dovecot.ca_file),
                NEWSLETTER_BOUNCES_PASSWORD=dovecot.password,
            )
            assert (await newsletter(["outbox", "migrate"], env, project)).code == 0
            assert (await newsletter(["worker", "--once"], env, project)).code == 0
            serve = await spawn(["serve", "--host", "127.0.0.1", "--port", "0"], env, project)
            assert serve.stderr is not None
            try:
                line = (await asyncio.wait_for(serve.stderr.readline(), 30)).decode()
                serve_port = int(line.split(" at ", 1)[1].split()[0].rstrip("/").rsplit(":")[-1])
                async with tls_proxy(server_tls, serve_port) as https_port:
                    base_url = f"https://127.0.0.1:{https_port}"
                    done = await newsletter(
                        ["doctor", "--min-free", "1"],
                        {**env, "NEWSLETTER_NEWSLETTER__BASE_URL": base_url},
                        project,
                    )
            finally:
                serve.terminate()
                await asyncio.wait_for(serve.wait(), 30)
    lines = done.out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["OK", name]
        for name in (
            "secret",
            "base_url",
            "serve",
            "signup",
            "smtp",
            "spf",
            "dkim",
            "dmarc",
            "mx",
            "database",
            "worker",
            "mailbox",
            "disk",
        )
    ], done.out
    assert done.code == 0, done.out
    assert done.err == "13 checks: every check passed\n"
    assert handler.received == []  # SMTP checked, nothing sent
