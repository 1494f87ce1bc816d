"""An issue, the settings and a list in; the email as it is sent out: with `[tracking] clicks`
on, its links slots (linkslots.py), the HTML part cut to fit Gmail's clip with the click URLs
at their real length; and, per issue, the click URLs a message's slots are filled with.

The URLs are `BASE/r/TOKEN` (links.click_url), the tokens mail/clicktokens.py's: the list's
(`aggregate`: the same for every reader, so a message is built with nothing filled per reader
for them) or the outbox row's (`per-reader`: every token of a message from one AES call). Row 0
names no reader: the sample message (`build`, `check`, the preview) and the redirect check of
`check --online` use it, and the redirect answers it without keeping an event.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from newsletter.config.settings import Settings, TrackingMode
from newsletter.links import click_url, issue_url
from newsletter.mail.clicktokens import BLOCK_TOKEN, LinkTokens
from newsletter.mail.tokens import Secret
from newsletter.models import Issue, Placeholder, RenderedEmail
from newsletter.rendering.clip import CUT_AT, wire_size
from newsletter.rendering.linkslots import SLOT_WORD, add_slots
from newsletter.rendering.places import Place
from newsletter.rendering.render import render_issue

PROBE_ROW = 0  # the row of no reader (see the module docstring)
# A slot of the rendered parts: a Placeholder word, or a link's slot number.
Slot = Placeholder | int
_CUTS = 4  # renders at most, when the links outgrow the clip: each cuts by what was over
_STAND_IN = b"\0" * 32  # a key for measuring only: a token's length does not depend on it


@dataclass(frozen=True)
class SendRendering:
    """The email as sent, and what each of its link slots stands for (none: not tracked)."""

    rendered: RenderedEmail
    links: tuple[tuple[Place, str], ...] = ()


def render_for_sending(issue: Issue, settings: Settings, list_name: str) -> SendRendering:
    """`issue` rendered for `list_name`, its links slots when `[tracking] clicks` is on."""
    rendered = render_issue(issue, settings)
    mode = settings.tracking.clicks
    if mode == TrackingMode.OFF:
        return SendRendering(rendered)
    base = settings.newsletter.base_url
    web = issue_url(base, issue.number)
    budget = CUT_AT
    for attempt in range(_CUTS):
        slotted = add_slots(rendered, issue, web)
        clicks = ClickLinks(_STAND_IN, issue.number, slotted.links, base)
        aggregate = mode == TrackingMode.AGGREGATE
        tokens = clicks.list_tokens(list_name) if aggregate else clicks.row_tokens(1)
        urls = [clicks.prefix + token for token in tokens]
        size = wire_size(_filled(slotted.rendered.html, urls))
        if size <= CUT_AT or rendered.keeps_nothing or attempt == _CUTS - 1:
            break
        # Cut by what the links added past the clip, from the size this cut has (not the
        # budget it had: a cut between blocks leaves less room unused than a section's).
        budget = wire_size(rendered.html) - (size - CUT_AT)
        rendered = render_issue(issue, settings, budget=budget)
    return SendRendering(slotted.rendered, slotted.links)


def _filled(html: str, urls: list[str]) -> str:
    return SLOT_WORD.sub(lambda match: urls[int(match.group(1))], html)


class ClickLinks:
    """The click tokens for the slots of one issue's email, in slot order, and the URL they
    follow (`prefix`: BASE/r/)."""

    def __init__(
        self, secret: Secret, issue: int, links: Sequence[tuple[Place, str]], base_url: str
    ) -> None:
        self._tokens = LinkTokens(secret, issue, links)
        self.prefix = click_url(base_url, "")
        # `row_tokens` as ASCII bytes: what follows `prefix` in each of a message's links (the
        # per-reader parts hold the prefix in their fixed bytes, `prefixed`); bound, not
        # wrapped: it runs once a message.
        self.row_bytes: Callable[[int], Sequence[bytes]] = self._tokens.row_bytes
        # Bytes as the parts hold them: base_url is plain ASCII (the factory checks it).
        self.prefix_text = self.prefix.encode()
        self.prefix_html = html.escape(self.prefix).encode()
        # Every token of a row's message has one length (a block's), but for rows past a
        # block's room: what lets the encoder take them a run at a time.
        self.token_length = BLOCK_TOKEN if self._tokens.blocks else None

    def for_every_message(
        self, mode: TrackingMode, list_name: str, *, sample: bool
    ) -> list[str] | None:
        """The URLs every message of the list gets: the list's (`aggregate`), no reader's (a
        sample); None when each reader gets their own (`per-reader`)."""
        if sample:
            return [self.prefix + token for token in self.row_tokens(PROBE_ROW)]
        if mode == TrackingMode.AGGREGATE:
            return [self.prefix + token for token in self.list_tokens(list_name)]
        return None

    def list_tokens(self, list_name: str) -> list[str]:
        """`aggregate`: what every reader of `list_name` gets."""
        return self._tokens.for_list(list_name)

    def row_tokens(self, row: int) -> list[str]:
        """`per-reader`: the message of outbox row `row` (PROBE_ROW: no reader's)."""
        return self._tokens.for_row(row)

    def prefixed(self, segments: list[bytes], slots: list[Slot], prefix: bytes) -> list[bytes]:
        """A part's segments with `prefix` (the text part's or the HTML part's spelling of
        BASE/r/) at the end of each one before a link's slot: the slot is then its token."""
        out = list(segments)
        for n, slot in enumerate(slots):
            if isinstance(slot, int):
                out[n] += prefix
        return out


def fold_links(
    segments: list[bytes], slots: list[Slot], urls: list[bytes]
) -> tuple[list[bytes], list[Slot]]:
    """The link slots of a part (between `segments`) filled with `urls` for good: each one's
    segments joined around it, the other slots left."""
    joined = [segments[0]]
    left: list[Slot] = []
    for slot, segment in zip(slots, segments[1:], strict=True):
        if isinstance(slot, int):
            joined[-1] += urls[slot] + segment
        else:
            left.append(slot)
            joined.append(segment)
    return joined, left
