"""The doctor's checks over the network: base_url and the serve behind it (proving it has this
project's secret), the SMTP relay (connect, TLS, AUTH, and nothing sent), the sender's DNS
(the preflight's own SPF, DKIM, DMARC and MX checks) and the bounce mailbox (logged in to, nothing
read or moved). Every connection keeps the preflight's rules: names through `[check]
nameservers`, and no private address unless `[check] allow_private` allows it."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import secrets
import socket
from collections.abc import Coroutine
from typing import Any

import httpx
from pydantic import SecretStr

from newsletter.bounces.inbox import open_inbox
from newsletter.config.settings import Settings, SmtpSettings
from newsletter.doctor.diagnosis import Diagnosis, failed, passed
from newsletter.errors import NewsletterError
from newsletter.links import HEALTH_PATH
from newsletter.mail.tokens import health_proof
from newsletter.preflight import auth, spf
from newsletter.preflight.connect import CheckedBackend, CheckedTransport, RefusedError
from newsletter.preflight.faults import Fault
from newsletter.preflight.linkcheck import describe_failure
from newsletter.preflight.lookup import Lookup, NetworkDownError, UnreachableError
from newsletter.preflight.run import checking_tls_context, dkim_public_key
from newsletter.send.faults import (
    CAPTURE_PORT,
    SESSION_ERRORS,
    OpeningError,
    check_failed,
    is_loopback,
)
from newsletter.send.opening import Opener
from newsletter.state.statecache import Cache

_MAX_BODY = 4096  # /healthz answers a few bytes; a proxy's error page is cut here
_DNS_DOWN = "Check the network, or name the DNS servers to ask in [check] nameservers."
_SERVE_FIX = (
    "Run `newsletter serve` (systemctl enable --now newsletter-serve) behind the TLS proxy that"
    " answers at base_url (the Caddy site file `newsletter deploy systemd` writes)."
)


def check_base_url(settings: Settings) -> Diagnosis:
    base = settings.newsletter.base_url
    if base.startswith("https://"):
        return passed("base_url", f"{base} is https")
    return failed(
        "base_url",
        f"{base} is not https: Gmail and Yahoo honour one-click unsubscribe only over https",
        "Put `newsletter serve` behind a TLS proxy (Caddy) and set [newsletter] base_url to its"
        " https:// address.",
    )


async def check_serve(settings: Settings, lookup: Lookup) -> Diagnosis:
    """GET base_url/healthz?probe=WORD: serve answers `proof P`, and P must be the proof this
    project's secret makes of WORD; the secret itself never leaves either process."""
    if settings.secret is None:
        return failed("serve", "not checked: no secret here to check serve's against", _SERVE_FIX)
    probe = secrets.token_urlsafe(16)
    url = settings.newsletter.base_url.rstrip("/") + HEALTH_PATH
    try:
        tls = checking_tls_context(settings)
    except NewsletterError as exc:  # [check] ca_file cannot be used
        return failed("serve", exc.message, exc.hint or "Fix [check] ca_file.")
    transport = CheckedTransport(
        CheckedBackend(lookup.addresses, settings.check.allow_private), tls
    )
    try:
        async with httpx.AsyncClient(
            transport=transport, trust_env=False, timeout=settings.check.timeout
        ) as client:
            status, body = await asyncio.wait_for(
                _get(client, url, probe), settings.check.timeout * 2
            )
    except RefusedError as exc:
        return failed(
            "serve",
            f"GET {url}: {exc}",
            "Allow the address in [check] allow_private (a serve on this network), or point"
            " base_url at the public name.",
        )
    except NetworkDownError as exc:
        return failed("serve", f"GET {url}: not checked: {exc}", _DNS_DOWN)
    except (httpx.HTTPError, OSError, TimeoutError, UnreachableError) as exc:
        return failed("serve", f"GET {url}: {describe_failure(exc)}", _SERVE_FIX)
    if status != 200:
        return failed("serve", f"GET {url}: answered {status}", _SERVE_FIX)
    expected = health_proof(settings.secret.get_secret_value().encode("utf-8"), probe)
    proofs = [line[6:] for line in body.splitlines() if line.startswith("proof ")]
    if not proofs:
        return failed(
            "serve",
            f"GET {url}: answers, but proves no secret: another site, or an older newsletter",
            "Upgrade newsletter where serve runs and restart it; check that the proxy passes"
            " /healthz to serve.",
        )
    if proofs[0] != expected:
        return failed(
            "serve",
            f"{url}: serve runs with another secret than this project's: the links sent from here"
            " would be refused there",
            "Give serve this project's secret (its EnvironmentFile, or .newsletter/secret in its"
            " project folder) and restart it.",
        )
    return passed("serve", f"{url} answers with this project's secret")


async def _get(client: httpx.AsyncClient, url: str, probe: str) -> tuple[int, str]:
    async with client.stream("GET", url, params={"probe": probe}) as response:
        body = b""
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > _MAX_BODY:
                break
    return response.status_code, body[:_MAX_BODY].decode("utf-8", "replace")


async def check_relays(
    settings: Settings, *, production: bool = False, lookup: Lookup | None = None
) -> list[Diagnosis]:
    """[smtp]'s own relay ("smtp"), then each [smtp.relays.NAME] ("smtp.NAME"), at once.
    `production` (the doctor's): SMTP on this machine without TLS fails too, for it is the
    capture server of `newsletter mailbox` or a local server that cannot be told from one;
    `check --online` takes it as the local send it is. `lookup` (the doctor's): with [check]
    nameservers, a relay's host is looked up there, never through the system's resolver."""
    smtp = settings.smtp
    password = settings.smtp_password
    checks = [_check_relay("smtp", "[smtp]", smtp, password, settings, production, lookup)]
    for name, relay in smtp.relays.items():
        table = f"[smtp.relays.{name}]"
        settings_of = smtp.relay(name)
        variable = relay.password_env or "password_env"
        checks.append(
            _check_relay(
                f"smtp.{name}",
                table,
                settings_of,
                relay.password,
                settings,
                production,
                lookup,
                variable,
            )
        )
    return list(await asyncio.gather(*checks))


async def _check_relay(
    check: str,
    table: str,
    smtp: SmtpSettings,
    password: SecretStr | None,
    settings: Settings,
    production: bool,
    lookup: Lookup | None,
    variable: str = "NEWSLETTER_SMTP_PASSWORD",
) -> Diagnosis:
    """One relay: connect, EHLO, STARTTLS when configured, AUTH, QUIT; never MAIL or RCPT."""
    where = f"{smtp.host}:{smtp.port}"
    if smtp.security == "none" and not is_loopback(smtp.host):
        return failed(
            check,
            f"{where}: {table} security is none: the password and every message cross the"
            " network in clear",
            f'Set {table} security = "starttls" (port 587) or "tls" (port 465).',
        )
    if smtp.security == "none" and production:
        return failed(check, _local_smtp(where, smtp.port), _LOCAL_SMTP_FIX.format(table=table))
    helo = email.utils.parseaddr(settings.newsletter.sender)[1].rpartition("@")[2] or "localhost"
    sock = None
    if lookup is not None and settings.check.nameservers and not _literal(smtp.host):
        try:
            sock = await _connected(lookup, smtp)
        except (UnreachableError, NetworkDownError, OSError, TimeoutError) as exc:
            return failed(check, f"{where}: {describe_failure(exc)}", _DNS_DOWN)
    try:
        opener = Opener(
            smtp, password=password, helo=helo, root=settings.root, variable=variable, table=table
        )
        client, wire = await opener.open(sock)
    except OpeningError as exc:
        error = check_failed(exc, smtp)
        fix = error.hint or f"Check {table} host, port and security."
        return failed(
            check,
            error.message,
            fix.replace("[smtp]", table).replace("NEWSLETTER_SMTP_PASSWORD", variable),
        )
    except NewsletterError as exc:
        if sock is not None:  # the Opener refused the settings before it took the socket
            sock.close()
        return failed(check, exc.message, exc.hint or f"Check the {table} table.")
    del client  # the wire has its connection now: QUIT goes through it, as the pool's does
    with contextlib.suppress(*SESSION_ERRORS, TimeoutError):
        wire.write(b"QUIT\r\n")
        await asyncio.wait_for(wire.reply(), 5)
    wire.close()
    steps = ["connected"]
    if smtp.security != "none":
        steps.append("TLS" if smtp.security == "tls" else "STARTTLS")
    if smtp.username:
        steps.append(f"AUTH as {smtp.username}")
    return passed(check, f"{where}: {', '.join(steps)} (nothing sent)")


_LOCAL_SMTP_FIX = (
    'Point {table} host at your mail provider\'s submission server with security = "starttls"'
    ' (port 587) or "tls" (port 465), username and its password; a relay on this machine must'
    " speak TLS too (docs/guide/production.md)."
)


def _literal(host: str) -> bool:
    """An address, or localhost: nothing for a resolver to answer."""
    if is_loopback(host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def _connected(lookup: Lookup, smtp: SmtpSettings) -> socket.socket:
    """A socket connected to [smtp] host, its name looked up through [check] nameservers as
    the doctor's other names are (the system's resolver would answer for another network)."""
    addresses = await lookup.addresses(smtp.host)
    if not addresses:
        raise OSError(f"{smtp.host} has no address (A or AAAA) at {lookup.where}")
    loop = asyncio.get_running_loop()
    failure: OSError = OSError(f"cannot connect to {smtp.host}")
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (address, smtp.port)), smtp.timeout)
        except (OSError, TimeoutError) as exc:
            sock.close()
            failure = OSError(f"cannot connect to {smtp.host} ({address}): {exc}")
            continue
        return sock
    raise failure


def _local_smtp(where: str, port: int) -> str:
    """Why SMTP on this machine in clear is no production relay, in a line."""
    if port == CAPTURE_PORT:
        return (
            f"{where}: the capture server of `newsletter mailbox` (its port): it keeps every"
            " message on this machine, so production mail would never reach a reader"
        )
    return (
        f"{where}: SMTP on this machine without TLS: the capture server of `newsletter"
        " mailbox`, or a local server that cannot be told from one; not a production relay"
    )


_DNS_FIX = {
    "spf": "Publish one SPF TXT record at {domain} that names your relay (the detail says what is"
    " wrong with the one there).",
    "dkim": "Publish the key of [dkim] private_key as TXT at {selector}._domainkey.{domain}.",
    "dmarc": "Publish a TXT record at _dmarc.{domain}, at least"
    ' "v=DMARC1; p=none; rua=mailto:...".',
    "mx": "Give {domain} an MX record (or an A record) of a server that accepts mail: bounces and"
    " replies go there.",
}


async def check_dns(settings: Settings, lookup: Lookup) -> list[Diagnosis]:
    """SPF, DKIM, DMARC and MX, each through the preflight's own check of it."""
    from_domain = _domain(settings.newsletter.sender)
    return_path = _domain(settings.bounces.return_path) or from_domain
    dkim = settings.dkim
    dkim_domain = dkim.domain.lower() if dkim else None
    jobs: dict[str, tuple[str, Coroutine[Any, Any, list[Fault]] | None]] = {
        "spf": (return_path, spf.check_spf(lookup, return_path)),
        "dkim": (from_domain, None),
        "dmarc": (from_domain, auth.check_dmarc(lookup, from_domain, dkim_domain, return_path)),
        "mx": (return_path, auth.check_mail_domain(lookup, return_path, "Return-Path (bounces)")),
    }
    key_fault: NewsletterError | None = None
    if dkim is not None:
        try:
            public = dkim_public_key(settings, Cache(None))
        except NewsletterError as exc:  # the key file missing or not a key: this line says so
            key_fault = exc
        else:
            check = auth.check_dkim(lookup, dkim.domain, dkim.selector, public)
            jobs["dkim"] = (dkim.domain, check)
    try:
        faults = await asyncio.gather(*(_faults(job) for _, job in jobs.values()))
    except NetworkDownError as exc:
        return [failed(name, f"not checked: {exc}", _DNS_DOWN) for name in jobs]
    found: list[Diagnosis] = []
    for (name, (domain, job)), found_faults in zip(jobs.items(), faults, strict=True):
        selector = dkim.selector if dkim is not None else "SELECTOR"
        fix = _DNS_FIX[name].format(domain=domain, selector=selector)
        if name == "dkim" and key_fault is not None:
            fix = key_fault.hint or "Point [dkim] private_key at the PEM file of the key."
            found.append(failed(name, key_fault.message, fix))
        elif job is None:
            found.append(
                failed(
                    name,
                    "no [dkim] table: messages go out unsigned, and bulk mail is rejected",
                    "Add [dkim] domain, selector and private_key, and publish the key (the manual,"
                    " DKIM), unless your relay signs for "
                    f"{from_domain}.",
                )
            )
        elif found_faults:
            found.append(failed(name, "; ".join(f.message for f in found_faults), fix))
        else:
            found.append(passed(name, f"{domain}: published and valid"))
    return found


async def _faults(job: Coroutine[Any, Any, list[Fault]] | None) -> list[Fault]:
    if job is None:
        return []
    try:
        return await job
    except UnreachableError as exc:
        return [Fault("dns", f"not checked: {exc}")]


def _domain(value: str) -> str:
    return email.utils.parseaddr(value)[1].rpartition("@")[2].lower().rstrip(".")


def check_mailbox(settings: Settings, webhooks: list[str]) -> Diagnosis:
    """[bounces] imap logged in to and its folder selected; nothing read, flagged or moved.
    Without it, the provider of [webhooks] relay is the bounce source when its key is set
    (`webhooks`: the providers whose route answers): its own line says whether events come."""
    provider = settings.webhooks.relay
    if not settings.bounces.imap and provider and provider in webhooks:
        return passed(
            "mailbox",
            f"no [bounces] imap: bounces and complaints come by {provider}'s webhook (the"
            " webhook line)",
        )
    if not settings.bounces.imap:
        return failed(
            "mailbox",
            "no [bounces] imap: bounces and complaints are never read, so dead addresses are"
            " mailed again and again",
            'Set [bounces] imap = "imaps://user@host/INBOX" (and NEWSLETTER_BOUNCES_PASSWORD),'
            " and run `newsletter bounces` from the timer of `newsletter deploy systemd`.",
        )
    try:
        inbox = open_inbox(settings)
    except NewsletterError as exc:
        return failed("mailbox", exc.message, exc.hint or "Check [bounces] imap and its password.")
    inbox.close()
    return passed("mailbox", f"{getattr(inbox, 'where', 'the mailbox')}: logged in (nothing read)")
