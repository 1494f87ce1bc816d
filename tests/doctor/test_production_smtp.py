"""`newsletter doctor`'s smtp lines against what a production relay is not (issue 41): the
capture server's port, SMTP on this machine in clear (a real aiosmtpd without STARTTLS on
127.0.0.1), a server that offers no TLS when TLS is asked for; and green against a local TLS
relay (aiosmtpd with STARTTLS, its certificate trusted through [smtp] ca_file). `check
--online` keeps taking a local relay in clear, the local send it is (test_relay_lines.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from support.dnszone import dns_server
from support.doctoring import doctor_env, run_doctor
from support.onlineproject import configure
from support.smtp import Authenticator, FaultyHandler, start


@pytest.mark.slow
async def test_the_capture_port_and_local_smtp_in_clear_are_production_failures(
    project: Path,
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:  # SMTP on loopback, no STARTTLS: what mailbox is
        _, checks = await run_doctor(project, doctor_env(server.port))
        local = checks["smtp"]
        assert local["ok"] is False, local
        assert local["detail"] == (
            f"127.0.0.1:{server.port}: SMTP on this machine without TLS: the capture server of"
            " `newsletter mailbox`, or a local server that cannot be told from one; not a"
            " production relay"
        )
        assert 'security = "starttls"' in str(local["fix"])
        assert "[smtp] host" in str(local["fix"])

        backup = {
            "NEWSLETTER_SMTP__RELAYS__BACKUP__HOST": "127.0.0.1",
            "NEWSLETTER_SMTP__RELAYS__BACKUP__PORT": str(server.port),
            "NEWSLETTER_SMTP__RELAYS__BACKUP__SECURITY": "none",
        }
        _, checks = await run_doctor(project, doctor_env(1025, **backup))
        assert checks["smtp"]["ok"] is False
        assert checks["smtp"]["detail"] == (
            "127.0.0.1:1025: the capture server of `newsletter mailbox` (its port): it keeps"
            " every message on this machine, so production mail would never reach a reader"
        )
        assert checks["smtp.backup"]["ok"] is False
        assert "[smtp.relays.backup] host" in str(checks["smtp.backup"]["fix"])

        # TLS asked for, and the server offers none: it fails at STARTTLS, nothing sent.
        tls = doctor_env(server.port, NEWSLETTER_SMTP__SECURITY="starttls")
        _, checks = await run_doctor(project, tls)
        assert checks["smtp"]["ok"] is False
        assert "does not offer STARTTLS" in str(checks["smtp"]["detail"])
    assert handler.received == []


@pytest.mark.slow
async def test_a_local_tls_relay_is_green(project: Path, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    handler = FaultyHandler()
    async with start(handler, starttls=context, auth=Authenticator("news", "s3cret")) as server:
        env = doctor_env(
            server.port,
            NEWSLETTER_SMTP__SECURITY="starttls",
            NEWSLETTER_SMTP__USERNAME="news",
            NEWSLETTER_SMTP__CA_FILE=str(ca_file),
            NEWSLETTER_SMTP_PASSWORD="s3cret",
        )
        _, checks = await run_doctor(project, env)
    assert checks["smtp"]["ok"] is True, checks["smtp"]
    assert checks["smtp"]["detail"] == (
        f"127.0.0.1:{server.port}: connected, STARTTLS, AUTH as news (nothing sent)"
    )
    assert handler.received == []


@pytest.mark.slow
async def test_the_relays_name_is_looked_up_through_the_configured_nameservers(
    project: Path, tmp_path: Path
) -> None:
    # Issue 40: the doctor asked the system's resolver for [smtp] host, whatever [check]
    # nameservers said. smtp.good.example exists only in this test's DNS server.
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("smtp.good.example").configure_cert(context)
    handler = FaultyHandler()
    zone = {("smtp.good.example", "A"): ["127.0.0.1"]}
    with dns_server(zone) as (dns_port, resolver):
        configure(project, nameserver=f"127.0.0.1:{dns_port}", base_url="https://x")
        async with start(handler, starttls=context) as server:
            env = doctor_env(
                server.port,
                NEWSLETTER_SMTP__HOST="smtp.good.example",
                NEWSLETTER_SMTP__SECURITY="starttls",
                NEWSLETTER_SMTP__CA_FILE=str(ca_file),
            )
            _, checks = await run_doctor(project, env)
    assert checks["smtp"]["ok"] is True, checks["smtp"]
    assert checks["smtp"]["detail"] == (
        f"smtp.good.example:{server.port}: connected, STARTTLS (nothing sent)"
    )
    assert ("smtp.good.example", "A") in resolver.queries
    assert handler.received == []
