"""The sender's domains in, what is wrong with their DKIM, DMARC and MX records out, as Faults.

- DKIM: the selector's TXT record exists and holds the public half of the configured private
  key. A different key is an error at any list size: every message would fail DKIM.
- DMARC: a record at `_dmarc.` of the From domain, else of its organizational domain (the
  registrable part, from the public suffix list), and From aligned with the DKIM `d=` domain or
  the return-path domain, strictly or relaxed as the record's `adkim`/`aspf` say.
- MX: the From and Reply-To domains take mail (an MX, else an address), so replies and bounces
  arrive; a null MX (`0 .`) says they never will.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_der_public_key,
)

from newsletter.checks.orgdomain import organizational_domain
from newsletter.preflight.faults import Fault
from newsletter.preflight.lookup import Lookup

DMARC_POLICIES = {"none", "quarantine", "reject"}


def public_key_base64(public_key: rsa.RSAPublicKey) -> str:
    """The key as DKIM's p= tag holds it: base64 of the DER SubjectPublicKeyInfo."""
    der = public_key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode("ascii")


def dkim_txt_value(public_key: str) -> str:
    """The TXT value to publish at SELECTOR._domainkey.DOMAIN (`public_key`: base64 DER)."""
    return f"v=DKIM1; k=rsa; p={public_key}"


async def check_dkim(lookup: Lookup, domain: str, selector: str, public_key: str) -> list[Fault]:
    """`public_key`: the configured key's public half, base64 DER (public_key_base64)."""
    name = f"{selector}._domainkey.{domain}"
    publish = f'publish TXT {name} "{dkim_txt_value(public_key)}"'
    records = await lookup.txt(name)
    if not records:
        return [
            Fault(
                "dkim",
                f"no DKIM key at {name}: no receiver can verify a signature; {publish}",
                "auth",
            )
        ]
    if len(records) > 1:
        return [Fault("dkim", f"{name} has {len(records)} TXT records; keep only: {publish}")]
    tags = parse_tags(records[0])
    if tags is None or tags.get("v", "DKIM1") != "DKIM1":
        return [Fault("dkim", f"the DKIM record at {name} is not a DKIM key: {publish}")]
    if tags.get("k", "rsa").lower() != "rsa":
        return [Fault("dkim", f"the DKIM record at {name} is k={tags['k']}, not rsa: {publish}")]
    published = "".join(tags.get("p", "").split())
    if not published:
        return [Fault("dkim", f"the DKIM key at {name} is revoked (empty p=): {publish}")]
    expected = _public_numbers(public_key)
    if expected is None or _public_numbers(published) != expected:
        return [
            Fault(
                "dkim",
                f"the DKIM key at {name} does not match [dkim] private_key: every message would "
                f"fail DKIM; {publish} (or point private_key at the key that belongs to it)",
            )
        ]
    if "y" in tags.get("t", "").split(":"):
        return [Fault("dkim", f"the DKIM record at {name} is in test mode (t=y)", "warning")]
    return []


async def check_dmarc(
    lookup: Lookup, from_domain: str, dkim_domain: str | None, return_path_domain: str
) -> list[Fault]:
    where = f"_dmarc.{from_domain}"
    found = await _dmarc_records(lookup, where)
    if not found and organizational_domain(from_domain) != from_domain:
        where = f"_dmarc.{organizational_domain(from_domain)}"
        found = await _dmarc_records(lookup, where)
    if not found:
        org = organizational_domain(from_domain)
        return [
            Fault(
                "dmarc",
                f"no DMARC record for {from_domain}: publish TXT _dmarc.{org} "
                f"{_dmarc_example(from_domain)} (then move to p=quarantine once reports show "
                "only your own mail)",
                "auth",
            )
        ]
    if len(found) > 1:
        return [Fault("dmarc", f"{where} has {len(found)} DMARC records; keep one", "auth")]
    tags = parse_tags(found[0])
    policy = (tags or {}).get("p", "").lower()
    if tags is None or policy not in DMARC_POLICIES:
        return [
            Fault(
                "dmarc",
                f"the DMARC record at {where} is broken (it needs p=none, quarantine or "
                f"reject): {found[0]!r}; e.g. {_dmarc_example(from_domain)}",
                "auth",
            )
        ]
    dkim_mode, spf_mode = tags.get("adkim", "r").lower(), tags.get("aspf", "r").lower()
    dkim_ok = dkim_domain is not None and aligned(from_domain, dkim_domain, dkim_mode)
    spf_ok = aligned(from_domain, return_path_domain, spf_mode)
    if dkim_ok or spf_ok:
        return []
    signed = f"the DKIM d= ({dkim_domain})" if dkim_domain else "a DKIM d= (no [dkim] table)"
    return [
        Fault(
            "dmarc",
            f"From {from_domain} is aligned with neither {signed} nor the return path "
            f"({return_path_domain}) under {where} (adkim={dkim_mode}, aspf={spf_mode}): DMARC "
            f"fails for every message; sign with [dkim] domain = {from_domain!r}",
            "auth",
        )
    ]


async def check_mail_domain(lookup: Lookup, domain: str, role: str) -> list[Fault]:
    """`role` names the address in messages: "From (bounces)", "Reply-To (replies)"."""
    exchanges = await lookup.mx(domain)
    if any(host == "." for _, host in exchanges):
        return [Fault("mx", f"{role} domain {domain} has a null MX: it accepts no mail")]
    if exchanges or await lookup.addresses(domain):
        return []
    return [
        Fault(
            "mx",
            f"{role} domain {domain} has no MX (and no address): mail to it cannot arrive; "
            f"publish MX {domain} with your mail server",
        )
    ]


async def _dmarc_records(lookup: Lookup, name: str) -> list[str]:
    return [r for r in await lookup.txt(name) if r.replace(" ", "").startswith("v=DMARC1")]


def _dmarc_example(domain: str) -> str:
    return f'"v=DMARC1; p=none; rua=mailto:dmarc@{organizational_domain(domain)}"'


def aligned(from_domain: str, other: str, mode: str) -> bool:
    """DMARC identifier alignment: the same domain (s), or the same organizational domain (r)."""
    a, b = from_domain.lower().rstrip("."), other.lower().rstrip(".")
    if mode == "s" or a == b:
        return a == b
    return organizational_domain(a) == organizational_domain(b)


def parse_tags(record: str) -> dict[str, str] | None:
    """`k=v; k=v` (DKIM, DMARC) -> dict with lower-case keys; None if a tag has no `=`."""
    tags: dict[str, str] = {}
    for part in record.split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            return None
        tags[key.strip().lower()] = value.strip()
    return tags


def _public_numbers(published: str) -> rsa.RSAPublicNumbers | None:
    try:
        key = load_der_public_key(base64.b64decode(published, validate=True))
    except (ValueError, binascii.Error):
        return None
    return key.public_numbers() if isinstance(key, rsa.RSAPublicKey) else None
