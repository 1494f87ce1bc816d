"""`newsletter doctor`'s checks over the network, each against a real server on loopback and
through the real command (a subprocess, --json): a `serve` process proving (or not) the
project's secret, an SMTP server with STARTTLS and AUTH (nothing sent), the dnslib DNS server
with the sender's records (or none), and Dovecot for the bounce mailbox (nothing read or moved)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dkimkeys import dkim_value
from support.dnszone import dns_server
from support.doctoring import doctor_env, run_doctor
from support.dovecot import Dovecot
from support.onlineproject import configure
from support.sendcli import spawn
from support.smtp import Authenticator, FaultyHandler, start

SENDER = "news.good.example"


@asynccontextmanager
async def running_serve(project: Path, env: dict[str, str]) -> AsyncIterator[str]:
    """`newsletter serve` as a process on 127.0.0.1, a free port; yields its URL."""
    proc = await spawn(["serve", "--host", "127.0.0.1", "--port", "0"], env, project)
    assert proc.stderr is not None
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line.startswith("Serving"), line
        yield line.split(" at ", 1)[1].split()[0].rstrip("/")
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.slow
async def test_serve_at_base_url_proves_the_projects_secret(project: Path) -> None:
    async with running_serve(project, doctor_env()) as url:
        env = doctor_env(NEWSLETTER_NEWSLETTER__BASE_URL=url)
        code, checks = await run_doctor(project, env)
        assert checks["serve"]["ok"] is True, checks["serve"]
        assert checks["serve"]["detail"] == f"{url}/healthz answers with this project's secret"
        assert code == 1  # the rest of this project is not production-ready
        assert checks["base_url"]["ok"] is False  # http://
        assert "TLS proxy" in str(checks["base_url"]["fix"])

        other = {**env, "NEWSLETTER_SECRET": "another-secret-0123456789abcdef"}
        _, checks = await run_doctor(project, other)
        assert checks["serve"]["ok"] is False
        assert "runs with another secret" in str(checks["serve"]["detail"])
        assert "EnvironmentFile" in str(checks["serve"]["fix"])

        private = {**env, "NEWSLETTER_CHECK__ALLOW_PRIVATE": "false"}
        _, checks = await run_doctor(project, private)
        assert checks["serve"]["ok"] is False
        assert "allow_private" in str(checks["serve"]["fix"])
    _, checks = await run_doctor(project, env)  # stopped
    assert checks["serve"]["ok"] is False
    assert "newsletter serve" in str(checks["serve"]["fix"])


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.mark.slow
async def test_smtp_connects_with_starttls_and_auth_and_sends_nothing(
    project: Path, ca: trustme.CA, tmp_path: Path
) -> None:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    handler = FaultyHandler()
    async with start(handler, starttls=tls, auth=Authenticator("news", "s3cret")) as server:
        smtp = {
            "NEWSLETTER_SMTP__SECURITY": "starttls",
            "NEWSLETTER_SMTP__USERNAME": "news",
            "NEWSLETTER_SMTP__CA_FILE": str(ca_file),
        }
        env = doctor_env(server.port, NEWSLETTER_SMTP_PASSWORD="s3cret", **smtp)
        _, checks = await run_doctor(project, env)
        assert checks["smtp"]["ok"] is True, checks["smtp"]
        assert checks["smtp"]["detail"] == (
            f"127.0.0.1:{server.port}: connected, STARTTLS, AUTH as news (nothing sent)"
        )
        wrong = doctor_env(server.port, NEWSLETTER_SMTP_PASSWORD="wrong", **smtp)
        _, checks = await run_doctor(project, wrong)
        assert checks["smtp"]["ok"] is False
        assert "AUTH refused for user 'news'" in str(checks["smtp"]["detail"])
        assert "NEWSLETTER_SMTP_PASSWORD" in str(checks["smtp"]["fix"])
    assert handler.received == []


@pytest.mark.slow
async def test_smtp_in_clear_to_another_host_fails_before_connecting(project: Path) -> None:
    env = doctor_env(NEWSLETTER_SMTP__HOST="smtp.example.org")
    _, checks = await run_doctor(project, env)
    assert checks["smtp"]["ok"] is False
    assert "security is none" in str(checks["smtp"]["detail"])
    assert 'security = "starttls"' in str(checks["smtp"]["fix"])


@pytest.mark.slow
async def test_the_senders_dns_through_the_configured_nameserver(project: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    zone = {
        (SENDER, "TXT"): ["v=spf1 ip4:192.0.2.0/24 -all"],
        (SENDER, "MX"): ["10 mx.good.example"],
        (f"nl._domainkey.{SENDER}", "TXT"): [dkim_value(key)],
        ("_dmarc.good.example", "TXT"): ["v=DMARC1; p=none; rua=mailto:d@good.example"],
        ("bare.example", "TXT"): ["x=1"],
    }
    with dns_server(zone) as (port, resolver):
        configure(project, nameserver=f"127.0.0.1:{port}", base_url="https://x", dkim_key=key)
        _, checks = await run_doctor(project, doctor_env())
        for name in ("spf", "dkim", "dmarc", "mx"):
            assert checks[name]["ok"] is True, checks[name]
        assert resolver.queries  # asked there, not the system's resolver

        bare = doctor_env(NEWSLETTER_NEWSLETTER__SENDER="Bare <digest@bare.example>")
        _, checks = await run_doctor(project, bare)
    for name in ("spf", "dmarc", "mx"):
        assert checks[name]["ok"] is False, checks[name]
        assert "bare.example" in str(checks[name]["fix"])
    assert "SPF" in str(checks["spf"]["detail"])
    assert checks["dkim"]["ok"] is True  # [dkim] still signs for news.good.example


@pytest.mark.slow
async def test_the_bounce_mailbox_logs_in_and_nothing_is_read_or_moved(
    project: Path, dovecot: Dovecot
) -> None:
    dovecot.append(b"From: a@example.org\r\nSubject: bounce\r\n\r\nbody\r\n")
    before = dovecot.count()
    imap = {
        "NEWSLETTER_BOUNCES__IMAP": dovecot.url,
        "NEWSLETTER_BOUNCES__CA_FILE": str(dovecot.ca_file),
    }
    _, checks = await run_doctor(
        project, doctor_env(NEWSLETTER_BOUNCES_PASSWORD=dovecot.password, **imap)
    )
    assert checks["mailbox"]["ok"] is True, checks["mailbox"]
    assert dovecot.count() == before
    assert dovecot.count("Newsletter-Processed") == 0
    _, checks = await run_doctor(project, doctor_env(NEWSLETTER_BOUNCES_PASSWORD="wrong", **imap))
    assert checks["mailbox"]["ok"] is False
    _, checks = await run_doctor(project, doctor_env())
    assert checks["mailbox"]["ok"] is False
    assert "[bounces] imap" in str(checks["mailbox"]["fix"])


@pytest.mark.slow
async def test_a_dkim_key_file_that_is_missing_fails_its_line_and_the_rest_still_run(
    project: Path,
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with dns_server({(SENDER, "TXT"): ["v=spf1 -all"]}) as (port, _):
        configure(project, nameserver=f"127.0.0.1:{port}", base_url="https://x", dkim_key=key)
        (project / "dkim.pem").unlink()
        code, checks = await run_doctor(project, doctor_env())
    assert code == 1
    assert checks["dkim"]["ok"] is False
    assert "dkim.pem" in str(checks["dkim"]["detail"])
    assert checks["spf"]["ok"] is True, checks["spf"]
    assert len(checks) == 13
