"""Who gets which subject, and which subject won: a reader's address key and the send's secret in;
in the sample or not, and their variant, out (a keyed hash: random to anyone without the secret,
the same on every run, so a resumed or repeated run puts each reader where the first did); and
per-variant messages and people's clicks in, the decision out.

The decision: the variant with more people's clicks per message sent wins. Fewer than MIN_CLICKS
people's clicks in all is too few to tell, and a tie is a tie: the first subject stays, and the
decision says which of the two it was.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass

MIN_CLICKS = 10  # people's clicks in the whole sample below which no subject is called better
_LABEL = b"newsletter subject test\n"


@dataclass(frozen=True)
class Split:
    secret: bytes
    issue: int
    list_name: str
    sample: float
    variants: int

    def _draw(self, key: str) -> tuple[float, int]:
        seed = f"{self.issue}\n{self.list_name}\n{key}".encode()
        mac = hmac.digest(self.secret, _LABEL + seed, "sha256")
        share = int.from_bytes(mac[:8], "big") / 2**64
        return share, int.from_bytes(mac[8:16], "big") % self.variants

    def in_sample(self, key: str) -> bool:
        return self._draw(key)[0] < self.sample

    def variant(self, key: str) -> int:
        return self._draw(key)[1]


@dataclass(frozen=True)
class Tally:
    messages: int  # sent to the variant's readers
    people: int  # of them, messages a person clicked a link of (scanners excluded)

    @property
    def rate(self) -> float:
        return self.people / self.messages if self.messages else 0.0


@dataclass(frozen=True)
class Decision:
    winner: int
    reason: str  # "clicks", "tie" or "too few clicks"
    detail: str  # the figures and the reason, one line, for `report`


def decide(subjects: Sequence[str], tallies: Sequence[Tally]) -> Decision:
    figures = "; ".join(
        f"{subject!r}: {t.messages} sent, {t.people} clicked by people ({t.rate:.1%})"
        for subject, t in zip(subjects, tallies, strict=True)
    )
    total = sum(t.people for t in tallies)
    if total < MIN_CLICKS:
        return Decision(
            0,
            "too few clicks",
            f"{figures}. Too few people's clicks to tell ({total}, fewer than {MIN_CLICKS}):"
            " the first subject stays.",
        )
    best = max(t.rate for t in tallies)
    leaders = [i for i, t in enumerate(tallies) if t.rate == best]
    if len(leaders) > 1:
        return Decision(0, "tie", f"{figures}. A tie: the first subject stays.")
    winner = leaders[0]
    return Decision(
        winner, "clicks", f"{figures}. {subjects[winner]!r} won on people's clicks per message."
    )
