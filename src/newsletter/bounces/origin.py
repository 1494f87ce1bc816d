"""A returned mail's bytes and the recipient it would act on in, a Proof out: whether the mail is
proven to come from that recipient's mailbox, its provider's mail system or feedback loop.

This is what a report must pass when no VERP tag ties it to one message (a Message-ID can be
quoted by anyone who saw it). A From line proves nothing by itself; a DKIM signature does. So a
report is proven when

1. it has exactly one From, and that address speaks for the recipient: the recipient's own
   address; a mail system address (mailer-daemon@, postmaster@ ...) of the recipient's domain,
   a parent or subdomain of it, or another domain of the same provider (gmail.com and
   googlemail.com); or the feedback loop of the recipient's provider (Yahoo's, Microsoft's ...);
2. and a DKIM signature whose d= is that From domain or a parent of it (relaxed alignment, as
   DMARC has it) verifies: From signed, the whole body covered (no `l=`), the key from DNS.

Only signatures that could prove something are checked (at most three), so a stranger's mail
never makes us query a domain of its choosing. DNS goes through [check] nameservers when set,
else the system's resolver, each lookup bounded by [check] timeout.
"""

from __future__ import annotations

import email.parser
import email.utils
from collections.abc import Sequence
from dataclasses import dataclass

import dkim
import dns.nameserver
import dns.resolver
from dkim.util import parse_tag_value

from newsletter.bounces.reports import DAEMON_NAMES

MAX_SIGNATURES = 3  # DKIM signatures verified per mail, at most

# Providers whose mail systems send from other domains than their readers' addresses. A domain
# here stands for its subdomains too (arf.mail.yahoo.com is Yahoo).
PROVIDERS: dict[str, tuple[str, ...]] = {
    "Google": ("gmail.com", "googlemail.com", "google.com"),
    "Microsoft": (
        "outlook.com",
        "hotmail.com",
        "live.com",
        "msn.com",
        "hotmail.co.uk",
        "hotmail.fr",
        "hotmail.de",
        "hotmail.it",
        "hotmail.es",
        "live.co.uk",
        "live.fr",
        "outlook.fr",
        "outlook.de",
    ),
    "Yahoo": (
        "yahoo.com",
        "ymail.com",
        "rocketmail.com",
        "yahoo.co.uk",
        "yahoo.fr",
        "yahoo.de",
        "yahoo.it",
        "yahoo.es",
        "yahoo.ca",
        "yahoo.com.au",
        "yahoo.net",
        "aol.com",
        "aim.com",
        "aol.net",
    ),
    "Apple": ("icloud.com", "me.com", "mac.com", "apple.com"),
    "Tencent": ("qq.com", "foxmail.com"),
    "NetEase": ("163.com", "126.com", "yeah.net", "netease.com"),
    "Yandex": ("yandex.ru", "yandex.com", "ya.ru"),
    "Mail.ru": ("mail.ru", "inbox.ru", "list.ru", "bk.ru"),
    "United Internet": ("gmx.de", "gmx.net", "gmx.at", "gmx.ch", "gmx.com", "web.de"),
    "Fastmail": ("fastmail.com", "fastmail.fm", "messagingengine.com"),
}
# The addresses their complaint feedback loops send from (beside any mail system address).
FEEDBACK_LOOPS = {
    "feedback@arf.mail.yahoo.com": "Yahoo",
    "scomp@aol.net": "Yahoo",
    "staff@hotmail.com": "Microsoft",
}


@dataclass(frozen=True)
class Proof:
    """`sender` is the From address ("" when there is none or several); `why` says what was
    proven, or why not, in words for the editor."""

    proven: bool
    sender: str
    why: str


class DkimKeys:
    """The TXT lookup DKIM verification uses: [check] nameservers, or the system's resolver."""

    def __init__(self, nameservers: Sequence[tuple[str, int]] = (), timeout: float = 5.0) -> None:
        self._timeout = timeout
        try:
            self._resolver = dns.resolver.Resolver(configure=not nameservers)
        except dns.resolver.NoResolverConfiguration:
            self._resolver = dns.resolver.Resolver(configure=False)
        if nameservers:
            self._resolver.nameservers = [dns.nameserver.Do53Nameserver(*n) for n in nameservers]
        self._resolver.cache = None

    def __call__(self, name: bytes | str, timeout: float = 5.0) -> bytes | None:
        """dkimpy's dnsfunc: the first TXT record at `name`, its strings joined; None if none."""
        host = name.decode("ascii", "replace") if isinstance(name, bytes) else name
        try:
            answer = self._resolver.resolve(
                host, "TXT", lifetime=min(timeout, self._timeout), search=False
            )
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer, dns.resolver.NoNameservers):
            return None
        except Exception as exc:  # timeouts, refusals, no nameserver: the key is unknown
            raise dkim.DnsTimeoutError(str(exc)) from None
        for record in answer:
            return b"".join(record.strings)
        return None


def prove(raw: bytes, recipient: str, keys: DkimKeys | None) -> Proof:
    """Whether `raw` is proven to speak for the mailbox of `recipient`; see the module doc.
    Without `keys` (no DNS here) nothing is proven."""
    try:
        head = email.parser.BytesHeaderParser().parsebytes(raw)
        froms = [str(v) for v in head.get_all("From") or []]
    except Exception:  # hostile header bytes: nothing proven
        return Proof(False, "", "its header cannot be read")
    if len(froms) != 1:
        return Proof(False, "", f"it has {len(froms)} From lines")
    sender = email.utils.parseaddr(froms[0])[1].strip().lower()
    if "@" not in sender:
        return Proof(False, "", "it has no From address")
    role = speaks_for(sender, recipient)
    if not role:
        return Proof(False, sender, f"{sender} does not speak for {recipient}")
    domain = sender.rpartition("@")[2]
    if keys is None:
        return Proof(False, sender, f"{role} by its From line; DKIM was not checked")
    if _signed_by(raw, domain, keys):
        return Proof(True, sender, f"{role}, DKIM-signed")
    return Proof(False, sender, f"{role} by its From line, but no DKIM signature of it verifies")


def speaks_for(sender: str, recipient: str) -> str:
    """Why `sender` may report on `recipient`'s mailbox ("" when it may not)."""
    if sender == recipient:
        return "the reader's own address"
    local, _, domain = sender.rpartition("@")
    theirs = recipient.rpartition("@")[2]
    provider = _provider(theirs)
    if provider is not None and FEEDBACK_LOOPS.get(sender) == provider:
        return f"{provider}'s feedback loop"
    if local not in DAEMON_NAMES:
        return ""
    if provider is not None and _provider(domain) == provider:
        return f"{provider}'s mail system"
    return f"the mail system of {theirs}" if _related(domain, theirs) else ""


def _signed_by(raw: bytes, domain: str, keys: DkimKeys) -> bool:
    """Whether a DKIM signature aligned with `domain` verifies over all of `raw`."""
    try:
        checker = dkim.DKIM(raw, minkey=1024, timeout=5)
        signatures = [v for k, v in checker.headers if k.lower() == b"dkim-signature"]
    except Exception:  # dkimpy refusing the message's shape
        return False
    useful = [i for i, value in enumerate(signatures) if _could_prove(value, domain)]
    return any(_verifies(checker, i, keys) for i in useful[:MAX_SIGNATURES])


def _could_prove(signature: bytes, domain: str) -> bool:
    """A signature of `domain` (or a parent) over From and the whole body; nothing else is
    worth a DNS query."""
    try:
        tags = parse_tag_value(signature)
        signer = tags.get(b"d", b"").decode("ascii").lower().rstrip(".")
        signed = [h.strip().lower() for h in tags.get(b"h", b"").split(b":")]
    except Exception:  # a malformed tag list proves nothing
        return False
    return _aligned(signer, domain) and b"l" not in tags and b"from" in signed


def _verifies(checker: dkim.DKIM, index: int, keys: DkimKeys) -> bool:
    try:
        return bool(checker.verify(idx=index, dnsfunc=keys))
    except Exception:  # dkimpy's own errors, and whatever hostile bytes make it raise
        return False


def _aligned(signer: str, domain: str) -> bool:
    return "." in signer and (domain == signer or domain.endswith("." + signer))


def _related(one: str, other: str) -> bool:
    """The same domain, or one a subdomain of the other (mx.example.org and example.org)."""
    return one == other or one.endswith("." + other) or other.endswith("." + one)


def _provider(domain: str) -> str | None:
    for name, domains in PROVIDERS.items():
        if any(domain == d or domain.endswith("." + d) for d in domains):
            return name
    return None
