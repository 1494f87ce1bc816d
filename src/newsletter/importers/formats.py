"""Each tool's export layout: a header in, whether it is that tool's, and one row in, a Row out
(the address, the name, the consent columns, or why this person must never be mailed).

The columns are the tools' own, read from their code, docs and exports:

- **Mailchimp** (an audience export is a ZIP of three CSVs): ``Email Address``, ``First Name``,
  ``Last Name``, the audience's merge fields, ``MEMBER_RATING``, ``OPTIN_TIME``, ``OPTIN_IP``,
  ``CONFIRM_TIME``, ``CONFIRM_IP``, ``LATITUDE`` ... ``REGION``, ``LAST_CHANGED``, ``LEID``,
  ``EUID``, ``NOTES``, ``TAGS``. The unsubscribed file adds ``UNSUB_TIME``, ``UNSUB_CAMPAIGN_*``,
  ``UNSUB_REASON``, ``UNSUB_REASON_OTHER``; the cleaned file ``CLEAN_TIME``, ``CLEAN_CAMPAIGN_*``.
  Every row of those two is a suppression.
- **Substack** (``email_list.*.csv`` in its ZIP): ``email``, ``active_subscription``, ``expiry``,
  ``plan``, ``email_disabled``, ``created_at``, ``first_payment_at``. ``email_disabled`` true is
  a reader who turned email off: a suppression. ``...@deletion-request.substack.com`` stands in
  for a reader who asked to be erased. Its subscriber-dashboard CSV ("Email, Name, Subscription
  type, ...") has no ``email_disabled`` and is refused: it cannot tell who must not be mailed.
- **Ghost** (Members, Export): ``id``, ``email``, ``name``, ``note``, ``subscribed_to_emails``,
  ``complimentary_plan``, ``stripe_customer_id``, ``created_at``, ``deleted_at``, ``labels``,
  ``tiers`` (older: ``products``). ``subscribed_to_emails`` false is a suppression.
- **Buttondown** (Subscribers, Export): ``id``, ``secondary_id``, ``email``, ``notes``,
  ``subscriber_type``, ``referrer_url``, ``utm_*``, ``creation_date``, ``ip_address``,
  ``subscription_date``, ``unsubscription_date``, ``tags``, ``metadata`` (a name, if any, is in
  the metadata). Types unsubscribed, removed, complained, undeliverable and blocked are
  suppressions; unactivated (never confirmed) is refused.
- **listmonk** (Subscribers, Export): ``uuid``, ``email``, ``name``, ``attributes``, ``status``,
  ``created_at``, ``updated_at``. Status disabled or blocklisted is a suppression. The export
  carries the subscriber's status, not the list subscription's: export a list with the
  subscription status "confirmed" (or import its unsubscribed export with --unsubscribed).
- **csv**: this tool's own list (``email``, ``name``, ``status``) with the consent columns
  ``subscribed_at``, ``subscribed_ip``, ``confirmed_at``, ``confirmed_ip`` when present.
"""

from __future__ import annotations

import ast
import json

from newsletter.importers.rows import Cells, Format, Row, RowMapper, name_of
from newsletter.importers.values import parse_flag

MAX_DETAIL = 500  # an unsubscribe reason typed by the reader is kept, but not without bound
MAX_METADATA = 10_000


# -- Mailchimp ------------------------------------------------------------------------------------

_MAILCHIMP_CONSENT = ("optin_time", "optin_ip", "confirm_time", "confirm_ip", "last_changed")
_MAILCHIMP_IDS = ("leid", "euid")


def _mailchimp(header: frozenset[str]) -> RowMapper:
    kind = "unsubscribed" if "unsub_time" in header else "cleaned" if "clean_time" in header else ""

    def row(cells: Cells) -> Row:
        name, name_field = name_of(
            cells, ("first name", "last name"), ("fname", "lname"), ("name",), ("full name",)
        )
        out = Row(cells.get("email address"), cells.label("email address"), name, name_field)
        out.evidence = cells.evidence(_MAILCHIMP_CONSENT + _MAILCHIMP_IDS)
        if kind == "unsubscribed":
            out.suppress, out.suppressed_at = "unsubscribed", out.time(cells, "unsub_time")
            reasons = (cells.get("unsub_reason"), cells.get("unsub_reason_other"))
            out.detail = "; ".join(r for r in reasons if r)[:MAX_DETAIL]
            return out
        if kind == "cleaned":
            out.suppress, out.suppressed_at = "cleaned", out.time(cells, "clean_time")
            out.detail = cells.get("clean_campaign_title")[:MAX_DETAIL]
            return out
        out.subscribed_at, out.subscribed_ip = (
            out.time(cells, "optin_time"),
            out.ip(cells, "optin_ip"),
        )
        out.confirmed_at = out.time(cells, "confirm_time")
        out.confirmed_ip = out.ip(cells, "confirm_ip")
        return out

    return row


# -- Substack -------------------------------------------------------------------------------------

SUBSTACK_ERASED = "@deletion-request.substack.com"


def _substack(header: frozenset[str]) -> RowMapper:
    def row(cells: Cells) -> Row:
        out = Row(cells.get("email"), cells.label("email"), *name_of(cells, ("name",)))
        if out.email.lower().endswith(SUBSTACK_ERASED):
            return out.refuse(
                out.email_field,
                "is Substack's stand-in for a reader who asked to be erased; not imported",
                "erased",
            )
        out.evidence = cells.evidence(("created_at", "email_disabled"))
        try:
            disabled = parse_flag(cells.get("email_disabled"))
        except ValueError as exc:
            return out.refuse(cells.label("email_disabled"), str(exc))
        if disabled:
            out.suppress = "email disabled"
            return out
        out.subscribed_at = out.time(cells, "created_at")
        return out

    return row


# -- Ghost ----------------------------------------------------------------------------------------


def _ghost(header: frozenset[str]) -> RowMapper:
    def row(cells: Cells) -> Row:
        out = Row(cells.get("email"), cells.label("email"), *name_of(cells, ("name",)))
        out.evidence = cells.evidence(("id", "created_at", "subscribed_to_emails", "deleted_at"))
        if cells.get("deleted_at"):
            out.suppress, out.suppressed_at = "deleted", out.time(cells, "deleted_at")
            return out
        try:
            subscribed = parse_flag(cells.get("subscribed_to_emails"))
        except ValueError as exc:
            return out.refuse(cells.label("subscribed_to_emails"), str(exc))
        if not subscribed:
            out.suppress = "unsubscribed"
            return out
        out.subscribed_at = out.time(cells, "created_at")
        return out

    return row


# -- Buttondown -----------------------------------------------------------------------------------

BUTTONDOWN_RECIPIENTS = frozenset(
    {"regular", "premium", "trialed", "gifted", "churning", "churned", "past_due", "paused"}
    | {"unpaid", "upcoming"}
)
BUTTONDOWN_SUPPRESSED = frozenset(
    {"unsubscribed", "removed", "complained", "undeliverable", "blocked"}
)
_BUTTONDOWN_CONSENT = (
    "id",
    "subscriber_type",
    "creation_date",
    "subscription_date",
    "ip_address",
    "referrer_url",
    "utm_source",
    "utm_medium",
    "utm_campaign",
)


def _buttondown(header: frozenset[str]) -> RowMapper:
    def row(cells: Cells) -> Row:
        out = Row(cells.get("email"), cells.label("email"), metadata_name(cells.get("metadata")))
        out.name_field = cells.label("metadata")
        out.evidence = cells.evidence(_BUTTONDOWN_CONSENT)
        kind = cells.get("subscriber_type").lower()
        if kind in BUTTONDOWN_SUPPRESSED:
            out.suppress = kind
            if kind == "unsubscribed":
                out.suppressed_at = out.time(cells, "unsubscription_date")
            return out
        if kind == "unactivated":
            return out.refuse(
                cells.label("subscriber_type"),
                "is unactivated: this reader never confirmed; not imported (they can sign up)",
                "unconfirmed",
            )
        if kind not in BUTTONDOWN_RECIPIENTS:
            known = ", ".join(sorted(BUTTONDOWN_RECIPIENTS | BUTTONDOWN_SUPPRESSED))
            return out.refuse(cells.label("subscriber_type"), f"is {kind!r}; expected {known}")
        first = "subscription_date" if cells.get("subscription_date") else "creation_date"
        out.subscribed_at, out.subscribed_ip = out.time(cells, first), out.ip(cells, "ip_address")
        return out

    return row


def metadata_name(text: str) -> str:
    """The name in a Buttondown metadata cell (JSON, or the Python dict its export writes):
    `name` or `full_name`, else `first_name` and `last_name`; "" when there is none."""
    if not text or len(text) > MAX_METADATA:
        return ""
    try:
        value = json.loads(text)
    except RecursionError:
        return ""  # nested too deep for any parser: no name in there
    except ValueError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return ""
    if not isinstance(value, dict):
        return ""
    keys = {str(k).lower(): v for k, v in value.items()}
    for key in ("name", "full_name"):
        if isinstance(keys.get(key), str) and keys[key].strip():
            return str(keys[key])
    parts = [keys.get(k) for k in ("first_name", "last_name")]
    return " ".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


# -- listmonk -------------------------------------------------------------------------------------

LISTMONK_STATUSES = {"enabled": None, "disabled": "disabled", "blocklisted": "blocklisted"}


def _listmonk(header: frozenset[str]) -> RowMapper:
    def row(cells: Cells) -> Row:
        out = Row(cells.get("email"), cells.label("email"), *name_of(cells, ("name",)))
        out.evidence = cells.evidence(("uuid", "status", "created_at"))
        status = cells.get("status").lower()
        if status not in LISTMONK_STATUSES:
            return out.refuse(
                cells.label("status"), f"is {status!r}; expected enabled, disabled or blocklisted"
            )
        out.suppress = LISTMONK_STATUSES[status]
        if out.suppress is None:
            out.subscribed_at = out.time(cells, "created_at")
        return out

    return row


# -- this tool's own CSV --------------------------------------------------------------------------

CSV_CONSENT = ("subscribed_at", "subscribed_ip", "confirmed_at", "confirmed_ip")


def _csv(header: frozenset[str]) -> RowMapper:
    def row(cells: Cells) -> Row:
        out = Row(cells.get("email"), cells.label("email"), *name_of(cells, ("name",)))
        out.evidence = cells.evidence(CSV_CONSENT)
        status = cells.get("status").lower()
        if status not in ("", "subscribed", "unsubscribed"):
            return out.refuse(
                cells.label("status"), f"is {status!r}; use subscribed or unsubscribed"
            )
        if status == "unsubscribed":
            out.suppress = "unsubscribed"
            return out
        out.subscribed_at, out.subscribed_ip = (
            out.time(cells, "subscribed_at"),
            out.ip(cells, "subscribed_ip"),
        )
        out.confirmed_at = out.time(cells, "confirmed_at")
        out.confirmed_ip = out.ip(cells, "confirmed_ip")
        return out

    return row


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "mailchimp",
            "Mailchimp",
            ("email address",),
            lambda h: "email address" in h and bool(h & {*_MAILCHIMP_CONSENT, *_MAILCHIMP_IDS}),
            _mailchimp,
        ),
        Format(
            "substack",
            "Substack",
            ("email", "email_disabled"),
            lambda h: {"email", "email_disabled"} <= h,
            _substack,
        ),
        Format(
            "ghost",
            "Ghost",
            ("email", "subscribed_to_emails"),
            lambda h: {"email", "subscribed_to_emails"} <= h,
            _ghost,
        ),
        Format(
            "buttondown",
            "Buttondown",
            ("email", "subscriber_type"),
            lambda h: {"email", "subscriber_type"} <= h,
            _buttondown,
        ),
        Format(
            "listmonk",
            "listmonk",
            ("email", "status"),
            lambda h: {"uuid", "email", "status", "attributes"} <= h,
            _listmonk,
        ),
        Format("csv", "newsletter CSV", ("email",), lambda h: "email" in h, _csv),
    )
}


def detect(header: frozenset[str]) -> Format | None:
    """The tool whose export has this header (lower-cased names): the first that fits, this
    tool's own CSV last, as the one any file with an `email` column fits."""
    return next((f for f in FORMATS.values() if f.detect(header)), None)


def unusable(header: frozenset[str]) -> str | None:
    """Why a header some tool writes cannot be imported safely, if it is one of those."""
    if {"email", "subscription type"} <= header and "email_disabled" not in header:
        return (
            "is Substack's subscriber-dashboard export, which does not say who turned email "
            "off; import the email_list CSV from the ZIP of Substack's settings export instead"
        )
    return None
