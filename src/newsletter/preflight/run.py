"""Settings, an issue and the sample message in, the online checks' OnlineReport out.

One run: the sender's DNS (SPF, DKIM, DMARC, MX), the one-click endpoint under base_url, the
redirects of the tracked links (with `[tracking] clicks` on), and every link of the issue, all
at once, within `[check] run_timeout`: what is not done by then is
reported as out of time. The sender's TXT record is asked first: when the resolver fails every
question (lookup.py tells that from one missing record), then or at any later point, the run
stops at once and the report carries one line saying why (exit codes stay those of the offline
checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.utils
import hashlib
import ssl
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from newsletter.checks.lint import Finding
from newsletter.config.settings import Settings, TrackingMode
from newsletter.database import Database
from newsletter.database.roster import Status
from newsletter.errors import ConfigError, SubscriberListError
from newsletter.links import HOW_TO_UNSUBSCRIBE_PATH
from newsletter.mail.signing import DkimSigner
from newsletter.mail.tokens import signing_key
from newsletter.models import Issue
from newsletter.preflight import auth, report, spf
from newsletter.preflight.faults import Fault
from newsletter.preflight.linkcheck import LinkChecker, LinkResult
from newsletter.preflight.lookup import Lookup, NetworkDownError, UnreachableError
from newsletter.preflight.redirects import check_redirects
from newsletter.state.statecache import FILE_NAME, Cache


@dataclass
class OnlineReport:
    findings: list[Finding] = field(default_factory=list)
    skipped: str = ""  # why the online checks did not run; empty when they did
    links: dict[str, LinkResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dns_queries: int = 0
    fetched: int = 0

    def summary(self) -> str:
        if self.skipped:
            return f"online checks skipped: {self.skipped}"
        skipped = sum(result.skipped for result in self.links.values())
        late = sum(result.out_of_time for result in self.links.values())
        failing = sum(not result.ok for result in self.links.values()) - late
        fine = len(self.links) - skipped - failing - late
        out_of_time = f", {late} out of time" if late else ""
        return (
            f"online: {len(self.links)} link(s): {fine} answering, {failing} failing"
            f"{out_of_time}, {skipped} not fetched (link_skip); {self.dns_queries} DNS and "
            f"{self.fetched} HTTP request(s) sent, the rest from the cache"
        )


def check_online(
    settings: Settings, issue: Issue, message: bytes, list_name: str, database: Database | None
) -> OnlineReport:
    """`newsletter check --online`: the online checks for `list_name`'s size, from sync code.
    `database`: the command's (context.py), None when there is no log yet."""
    size = list_size(settings, list_name, database)
    return asyncio.run(run_online(settings, issue, message, size))


def list_size(settings: Settings, list_name: str, database: Database | None) -> int:
    """Rows of the list's CSV, header and blank lines left out, and its confirmed subscribers
    in the outbox: the bulk-sender line needs the size, not validated addresses, so a
    million-row list costs one read, not a parse."""
    members = 0
    if database is not None:
        members = database.roster.counts(list_name)[Status.CONFIRMED]
    csv = settings.mailing_list(list_name).path
    if csv is None:
        return members
    path = settings.resolve(csv)
    try:
        with path.open("rb") as handle:
            rows = sum(1 for line in handle if line.strip())
    except FileNotFoundError:
        raise SubscriberListError(f"{path}: no such subscriber list") from None
    except OSError as exc:
        raise SubscriberListError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return max(rows - 1, 0) + members


def checking_tls_context(settings: Settings) -> ssl.SSLContext:
    """The system's CAs, plus [check] ca_file when set; verification is never turned off."""
    context = ssl.create_default_context()
    if settings.check.ca_file is not None:
        path = settings.resolve(settings.check.ca_file)
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"check.ca_file: cannot use {path}: {getattr(exc, 'strerror', None) or exc}",
                hint="Point [check] ca_file at a PEM file with the CA's certificate.",
            ) from None
    return context


async def run_online(
    settings: Settings,
    issue: Issue,
    message: bytes,
    recipients: int,
) -> OnlineReport:
    """`message`: one recipient's finished message, whose From and Reply-To every message
    carries; `send` uses the From address as the return path (MAIL FROM) too, unless
    [bounces] return_path sets one (VERP): then SPF is that domain's, and it needs an MX.
    `recipients`: the list's size, for the bulk-sender line."""
    deadline = asyncio.get_running_loop().time() + settings.check.run_timeout
    cache = Cache(settings.state_dir / FILE_NAME)
    lookup = Lookup(settings.check, cache)
    try:
        return await _run(settings, issue, message, recipients, cache, lookup, deadline)
    except NetworkDownError as exc:
        return OnlineReport(skipped=_offline(exc))


def _offline(exc: NetworkDownError) -> str:
    return f"{exc} (offline? a captive network? [check] nameservers names the DNS servers to ask)"


async def _run(
    settings: Settings,
    issue: Issue,
    message: bytes,
    recipients: int,
    cache: Cache,
    lookup: Lookup,
    deadline: float,
) -> OnlineReport:
    head = message.partition(b"\r\n\r\n")[0]
    headers = email.parser.BytesHeaderParser().parsebytes(head)
    from_domain = _domain(headers.get("From", ""))
    reply_domain = _domain(headers.get("Reply-To", ""))
    return_path = _domain(settings.bounces.return_path) or from_domain
    # First and alone: when the network is down, nothing else is tried. A failure of this name
    # only is the SPF check's to report.
    try:
        async with asyncio.timeout_at(deadline):
            with contextlib.suppress(UnreachableError):
                await lookup.txt(from_domain)
    except TimeoutError:  # only with a run_timeout shorter than the DNS timeout
        return OnlineReport(
            skipped=f"the sender's DNS did not answer within the run's "
            f"{settings.check.run_timeout:g} s ([check] run_timeout)"
        )
    checker = LinkChecker(settings.check, cache, lambda: checking_tls_context(settings), lookup)
    late = f"out of time (the run's {settings.check.run_timeout:g} s, [check] run_timeout)"
    dkim_domain = settings.dkim.domain.lower() if settings.dkim is not None else None
    jobs: list[tuple[str, Coroutine[Any, Any, list[Fault]]]] = [
        ("SPF", spf.check_spf(lookup, return_path)),
        ("DMARC", auth.check_dmarc(lookup, from_domain, dkim_domain, return_path)),
        ("MX", auth.check_mail_domain(lookup, from_domain, "From (bounces)")),
        ("One-click", _endpoint(settings.newsletter.base_url, checker, deadline)),
    ]
    if settings.tracking.clicks != TrackingMode.OFF:
        key = signing_key(settings, allow_ephemeral=True)
        secret = None if key.ephemeral else key.secret
        jobs.append(("Redirect", check_redirects(settings, issue, checker, secret, deadline)))
    if settings.dkim is not None:
        public = dkim_public_key(settings, cache)
        check = auth.check_dkim(lookup, settings.dkim.domain, settings.dkim.selector, public)
        jobs.append(("DKIM", check))
    if return_path != from_domain:
        jobs.append(("MX", auth.check_mail_domain(lookup, return_path, "Return-Path (bounces)")))
    if reply_domain and reply_domain != from_domain:
        jobs.append(("MX", auth.check_mail_domain(lookup, reply_domain, "Reply-To (replies)")))
    labels = report.item_labels(issue, settings.newsletter.language)
    try:
        async with asyncio.TaskGroup() as group:
            links_task = group.create_task(checker.check(labels, deadline))
            tasks = [group.create_task(_guarded(what, job, deadline, late)) for what, job in jobs]
    except ExceptionGroup as failed:
        # NetworkDownError (run_online says it in one line), a NewsletterError (a bad ca_file,
        # say) or a bug.
        raise failed.exceptions[0] from None
    links = links_task.result()
    faults = [task.result() for task in tasks]
    cache.save()
    findings = report.fault_findings((f for group in faults for f in group), recipients)
    findings += report.link_findings(links, labels)
    return OnlineReport(
        findings=sorted(findings, key=lambda f: f.level != "error"),
        links=links,
        notes=report.link_notes(links, labels),
        dns_queries=lookup.queries,
        fetched=checker.fetched,
    )


def dkim_public_key(settings: Settings, cache: Cache) -> str:
    """The configured key's public half (base64 DER), remembered by the key file's hash:
    checking an RSA private key costs more than a whole cached run."""
    assert settings.dkim is not None
    try:
        data = settings.resolve(settings.dkim.private_key).read_bytes()
    except OSError:
        data = b""  # DkimSigner says what is wrong with the file
    key = f"dkim-public:{hashlib.sha256(data).hexdigest()}"
    cached = cache.get(key)
    if isinstance(cached, str):
        return cached
    public = auth.public_key_base64(DkimSigner.from_settings(settings)[0].public_key())
    cache.put(key, public, settings.check.cache_ttl)
    return public


async def _guarded(
    what: str, check: Awaitable[list[Fault]], deadline: float, late: str
) -> list[Fault]:
    """A lookup that fails midway costs that one check, as a warning, not the whole run; so
    does the run's deadline."""
    code = "one-click" if what == "One-click" else what.lower()
    try:
        async with asyncio.timeout_at(deadline):
            return await check
    except UnreachableError as exc:
        return [Fault(code, f"{what} not checked: {exc}", "warning")]
    except TimeoutError:
        return [Fault(code, f"{what} not checked: {late}", "warning")]


async def _endpoint(base_url: str, checker: LinkChecker, deadline: float) -> list[Fault]:
    base = base_url.rstrip("/")
    faults = []
    if not base.startswith("https://"):
        faults.append(
            Fault(
                "one-click",
                f"base_url {base} is not https: Gmail and Yahoo honour one-click unsubscribe "
                "only over https; put `newsletter serve` behind a TLS proxy and set base_url",
                "auth",
            )
        )
    url = base + HOW_TO_UNSUBSCRIBE_PATH  # serve's public how-to page: a GET changes nothing
    result = (await checker.check([url], deadline))[url]
    if result.out_of_time:
        faults.append(Fault("one-click", f"GET {url} not checked: {result.error}", "warning"))
    elif not result.ok:
        problem = result.error or str(result.status)
        faults.append(
            Fault(
                "one-click",
                f"the unsubscribe endpoint does not answer: GET {url}: {problem}; run "
                "`newsletter serve` behind the proxy that answers at base_url",
            )
        )
    return faults


def _domain(value: str) -> str:
    address = email.utils.parseaddr(value)[1]
    return address.rpartition("@")[2].lower().rstrip(".")
