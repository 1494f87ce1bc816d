"""An issue file's `silence:` entries in; the Silences they ask for out, each checked against
the names of the checks `newsletter check` runs.

Every finding ends with its check's name (`[duplicate-url]`). When the editor has looked and
meant it (a weekly that links a meetup's page under each of its events), the issue file may
silence that check's warnings, all of them or those about given URLs; `check` then says what it
silenced. An error is never silenced: it is what stops a send. The checks that protect readers
(the unsubscribe link, the clip, left-over template markers) or that judge the sender's setup
rather than the issue's text cannot be named at all: CHECKS says which, and why.

    silence: [duplicate-url]                      # every duplicate-url warning
    silence:
      - duplicate-url: https://meet.example.org/lisbon-crabs    # only this URL's
      - http: [http://old.example.org/, http://legacy.example.org/]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One check by name: whether an issue file may silence its warnings, and why not."""

    name: str
    silenceable: bool
    why: str = ""  # why an issue file may not silence it
    by_url: bool = False  # each finding is about one URL, so a silence may name URLs


_SENDER = "it is about the sender's domain, not this issue: fix it in DNS or the config"
_LINKS = (
    "what a link answers changes from day to day; a host that refuses robots goes in "
    "[check] link_skip"
)
CHECKS: dict[str, Check] = {
    check.name: check
    for check in (
        # The issue's own text: the editor may judge these.
        Check("duplicate-url", True, by_url=True),
        Check("http", True, by_url=True),
        Check("empty-section", True),
        Check("bidi", True),
        Check("markup", True),  # its errors (lists nested past the parser's limit) stay
        Check("numbering", True),
        Check("image-size", True),
        Check("image-weight", True),
        Check("size", True),  # the warning near the clip; the error past it stays
        Check("clip", True),  # the warning of a cut issue; the error stays
        Check("section-size", True),
        Check("sent", True),  # edited after its send, knowingly (a typo fixed for the archive)
        # What readers would lose.
        Check("list", False, "it is about the list's CSV, not this issue: fix its rows"),
        Check(
            "template-behind",
            False,
            "it is about the project's template copies, not this issue: update the copy, or "
            "`newsletter templates follow NAME` once you have",
        ),
        Check("issue-file", False, "a file that does not load renders nothing"),
        Check("unsubscribe", False, "every reader must be able to leave, from either part"),
        Check("markers", False, "readers would see the template's code instead of the text"),
        Check("parts", False, "a message without its HTML or text part reaches readers broken"),
        Check("style-size", False, "Gmail would drop every <style> block, and the layout"),
        Check("link", False, "a link that is not absolute goes nowhere for readers"),
        Check("alt", False, "without alt text a screen reader reads out the image's file name"),
        Check("tracking-pixel", False, "it tells another site which reader opened the email"),
        Check(
            "spam-score",
            False,
            "the score is the whole message's: a rule that scores next time would be hidden too",
        ),
        # The sender's setup, and what the links answer today (check --online).
        *(
            Check(name, False, _SENDER)
            for name in (
                "spf",
                "dkim",
                "dmarc",
                "mx",
                "dns",
                "one-click",
                "tracked-host",
                "redirect",
            )
        ),
        *(Check(name, False, _LINKS) for name in ("link-check", "link-moved")),
    )
}


@dataclass(frozen=True)
class Silence:
    """Silence `check`'s warnings: all of them, or only those about `urls`."""

    check: str
    urls: tuple[str, ...] = ()

    def __str__(self) -> str:
        return " ".join((self.check, *self.urls))

    def covers(self, code: str, subject: str) -> bool:
        return code == self.check and (not self.urls or subject in self.urls)


def read_silence(value: Any) -> Silence:
    """`name` or `{name: url}` / `{name: [url, …]}` -> a Silence; ValueError saying why not."""
    if isinstance(value, Silence):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((name, urls),) = value.items()
        urls = [urls] if isinstance(urls, str) else urls
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            raise ValueError(f"{name}: give the URL(s) whose warnings to silence, or none")
        check = _known(name)
        if not check.by_url:
            raise ValueError(f"{name} is not about one URL at a time; silence it whole: - {name}")
        return Silence(check.name, tuple(dict.fromkeys(u.strip() for u in urls)))
    if not isinstance(value, str):
        raise ValueError(
            f"must be a check's name (- duplicate-url) or a name and URLs "
            f"(- duplicate-url: https://…), got {value!r}"
        )
    return Silence(_known(value.strip()).name)


def _known(name: Any) -> Check:
    check = CHECKS.get(name) if isinstance(name, str) else None
    if check is None:
        raise ValueError(
            f"{name!r} is not the name of a check that can be silenced; those are: "
            f"{', '.join(silenceable())}"
        )
    if not check.silenceable:
        raise ValueError(f"{name} cannot be silenced: {check.why}")
    return check


def silenceable() -> list[str]:
    return sorted(name for name, check in CHECKS.items() if check.silenceable)
