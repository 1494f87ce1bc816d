"""A signup as posted (form fields or a JSON object's items) in; the request to act on, or why
there is none, out. The HTML form and the JSON endpoint both come through here, so neither
accepts a field, a length or an address the other would refuse.

Fields: ``email``, ``list`` (optional when the site has one signup list), ``altcha`` (the
solved proof of work, verified later by challenge.py) and the honeypot ``homepage``: a field
people never see (hidden from sight and from screen readers, no autofill), so any value in it
was typed by a program. Answer a honeypot exactly as an accepted signup, so the program learns
nothing; send nothing. Anything else (an unknown or repeated field, a value that is not text,
one too long) is refused before anything is looked up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum

from newsletter.importers.subscribers import Refusal, check_entry
from newsletter.signup.challenge import MAX_PAYLOAD

HONEYPOT = "homepage"
FIELDS = frozenset({"email", "list", "altcha", HONEYPOT})
MAX_ADDRESS = 254  # RFC 5321's limit on a path, less its angle brackets
MAX_FIELDS = 8
_LIMITS = {"email": MAX_ADDRESS, "list": 64, "altcha": MAX_PAYLOAD, HONEYPOT: 200}


class FormVerdict(StrEnum):
    OK = "ok"
    HONEYPOT = "honeypot"  # answer as if accepted; send nothing
    MALFORMED = "malformed"  # not our form: unknown, repeated, missing or oversized fields
    BAD_ADDRESS = "bad-address"  # the visitor's typo: say so (syntax only, reveals nothing)
    UNKNOWN_LIST = "unknown-list"


@dataclass(frozen=True)
class Signup:
    """A well-formed signup: the ASCII envelope address, the list, the proof-of-work payload."""

    address: str
    list_name: str
    payload: str


@dataclass(frozen=True)
class FormRefusal:
    verdict: FormVerdict
    reason: str


def read_signup(
    fields: Iterable[tuple[str, object]], lists: Collection[str]
) -> Signup | FormRefusal:
    """The signup in `fields` (name, value pairs as posted), for one of `lists` (the lists that
    take signups; with only one, `list` may be left out)."""
    values: dict[str, str] = {}
    for count, (name, value) in enumerate(fields, 1):
        if count > MAX_FIELDS or name not in FIELDS:
            return FormRefusal(FormVerdict.MALFORMED, "a field this form does not have")
        if name in values:
            return FormRefusal(FormVerdict.MALFORMED, f"the field {name} appears twice")
        if not isinstance(value, str):
            return FormRefusal(FormVerdict.MALFORMED, f"the field {name} is not text")
        if len(value) > _LIMITS[name]:
            return FormRefusal(FormVerdict.MALFORMED, f"the field {name} is too long")
        values[name] = value
    if values.get(HONEYPOT, "").strip():
        return FormRefusal(FormVerdict.HONEYPOT, "the hidden field was filled in")
    list_name = values.get("list", "")
    if not list_name and len(lists) == 1:
        list_name = next(iter(lists))
    if list_name not in lists:
        return FormRefusal(FormVerdict.UNKNOWN_LIST, "no list of that name takes signups")
    payload = values.get("altcha", "")
    if not payload:
        return FormRefusal(FormVerdict.MALFORMED, "the proof of work is missing")
    checked = check_entry(values.get("email", ""), "")
    if isinstance(checked, Refusal):
        return FormRefusal(FormVerdict.BAD_ADDRESS, checked.reason)
    return Signup(checked[0], list_name, payload)
